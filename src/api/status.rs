//! The one place errors become gRPC statuses. The match is exhaustive on purpose: a new
//! error cannot ship without a status.

use tonic::Status;

/// Why a request was refused before any decision was made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// A field is malformed; the message names it and never echoes its content.
    #[error("{field}: {message}")]
    InvalidArgument { field: String, message: String },
    /// The request is over the configured size limit.
    #[error("request is {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    /// The stream ended or broke before a decision could be made.
    #[error("stream: {0}")]
    Stream(String),
    /// More calls in flight than the server admits; the caller should back off and retry.
    #[error("overloaded: {in_flight} calls in flight; retry with backoff")]
    Overloaded { in_flight: usize },
    /// A fault inside the server (a worker task died); never carries request content.
    #[error("internal: {0}")]
    Internal(String),
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        let msg = e.to_string();
        match e {
            ApiError::InvalidArgument { .. } => Status::invalid_argument(msg),
            ApiError::TooLarge { .. } => Status::resource_exhausted(msg),
            ApiError::Stream(_) => Status::invalid_argument(msg),
            ApiError::Overloaded { .. } => Status::unavailable(msg),
            ApiError::Internal(_) => Status::internal(msg),
        }
    }
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::InvalidArgument {
            field: field.into(),
            message: message.into(),
        }
    }
}
