//! Real servers for the tests: a PostgreSQL cluster in a temporary directory, and toolgate
//! itself as a child process. Nothing here is mocked; a missing server binary fails the test
//! with what to install.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Where PostgreSQL's server programs are: `TOOLGATE_PG_BIN`, Debian's
/// `/usr/lib/postgresql/N/bin` (newest), or the PATH.
fn pg_bin() -> PathBuf {
    if let Ok(p) = std::env::var("TOOLGATE_PG_BIN") {
        return PathBuf::from(p);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("pg_ctl").exists())
        .collect();
    found.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(p) = found.pop() {
        return p;
    }
    let which = Command::new("sh")
        .args(["-c", "command -v pg_ctl"])
        .output()
        .expect("sh runs");
    let path = String::from_utf8_lossy(&which.stdout).trim().to_string();
    assert!(
        !path.is_empty(),
        "PostgreSQL server programs not found: install Debian's `postgresql` \
         (`.ci/run` does) or set TOOLGATE_PG_BIN"
    );
    PathBuf::from(path).parent().unwrap().to_path_buf()
}

/// A PostgreSQL cluster of its own on a free loopback port, removed on drop. `initdb`
/// refuses to run as root, so as root the cluster belongs to the `postgres` user.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    pub port: u16,
}

impl Postgres {
    pub fn start() -> Postgres {
        let bin = pg_bin();
        let dir = tempfile::tempdir().unwrap();
        let as_postgres = is_root();
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success(), "chown to the postgres user");
        }
        let pg = Postgres {
            dir,
            bin,
            as_postgres,
            port: free_port(),
        };
        let data = pg.data();
        let out = pg
            .cmd("initdb")
            .args([
                "-A",
                "trust",
                "-U",
                "toolgate",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pg.up();
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn cmd(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        c.stdin(Stdio::null());
        c
    }

    /// Starts (or restarts) the server and waits until it accepts connections.
    pub fn up(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off",
            self.port,
            self.dir.path().display()
        );
        let out = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-o", &opts, "-l"])
            .arg(self.dir.path().join("log"))
            .args(["-w", "-t", "60", "start"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stdout),
            std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
        );
    }

    /// Stops the server (fast: open connections are cut, as in an outage).
    pub fn down(&self) {
        let _ = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "fast", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    pub fn url(&self) -> String {
        format!("postgres://toolgate@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs SQL as the superuser.
    pub async fn exec(&self, sql: &str) {
        let (client, conn) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .expect("connects to the test database");
        let driver = tokio::spawn(conn);
        client.batch_execute(sql).await.expect("SQL runs");
        drop(client);
        let _ = driver.await;
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// `toolgate serve` as a child process (killed on drop), with its own environment.
pub struct Toolgate {
    child: Child,
    pub addr: String,
    pub admin: String,
    pub stderr: PathBuf,
}

impl Toolgate {
    pub async fn serve(policy: &Path, env: &[(&str, &str)], extra: &[&str]) -> Toolgate {
        // The ports are picked free and then bound by the child: another test may take one
        // in between. The child then exits, and a later connect could even reach that other
        // listener, so both ports must answer while the child lives; otherwise new ports.
        for _ in 0..5 {
            if let Some(t) = Toolgate::try_serve(policy, env, extra).await {
                return t;
            }
        }
        panic!("toolgate did not start in 5 tries (ports taken?)");
    }

    async fn try_serve(policy: &Path, env: &[(&str, &str)], extra: &[&str]) -> Option<Toolgate> {
        let addr = format!("127.0.0.1:{}", free_port());
        let admin = format!("127.0.0.1:{}", free_port());
        let stderr = policy.with_extension(format!("{}.log", free_port()));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.args(["serve", "--listen", &addr, "--admin-listen", &admin])
            .arg("--policy")
            .arg(policy)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if !extra.contains(&"--decision-log") {
            cmd.args(["--decision-log", "off"]);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let mut t = Toolgate {
            child,
            addr,
            admin,
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(_)) = t.child.try_wait() {
                return None;
            }
            let up = tokio::net::TcpStream::connect(&t.addr).await.is_ok()
                && tokio::net::TcpStream::connect(&t.admin).await.is_ok();
            if up && matches!(t.child.try_wait(), Ok(None)) {
                return Some(t);
            }
            assert!(
                Instant::now() < deadline,
                "toolgate did not start: {}",
                t.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits for the process to drain and exit; true when it exited cleanly.
    pub async fn terminate(&mut self) -> bool {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            assert!(Instant::now() < deadline, "toolgate did not stop");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub async fn client(
        &self,
    ) -> toolgate::proto::guard_service_client::GuardServiceClient<tonic::transport::Channel> {
        toolgate::proto::guard_service_client::GuardServiceClient::connect(format!(
            "http://{}",
            self.addr
        ))
        .await
        .unwrap()
    }

    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

impl Drop for Toolgate {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `redis-server` of its own on a free loopback port (no persistence), killed on drop.
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
}

impl Redis {
    pub fn start() -> Redis {
        let mut r = Redis {
            child: None,
            port: free_port(),
        };
        r.up();
        r
    }

    /// Starts (or restarts, empty) the server and waits until it answers.
    pub fn up(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs: install Debian's `redis-server` (`.ci/run` does)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                use std::io::{Read, Write};
                let mut buf = [0u8; 16];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read(&mut buf)
                        .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
                {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.down();
    }
}
