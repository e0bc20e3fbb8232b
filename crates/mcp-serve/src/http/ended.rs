//! A session ended by `DELETE` is answered `204 No Content`: rmcp says `202`, which clients
//! such as the Python SDK report as a failed termination (docs/upstream.md#rmcp-delete-202).

use http::{Method, Request, StatusCode};

use super::answer::Answer;
use super::check::Check;

/// Turns the `202 Accepted` answering a `DELETE` into `204 No Content`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SessionEnd;

impl<B> Check<B> for SessionEnd {
    /// Whether the request ends a session.
    type Kept = bool;

    fn check(&self, request: &Request<B>) -> Result<bool, Answer> {
        Ok(request.method() == Method::DELETE)
    }

    fn answer(ends_session: bool, mut answer: Answer) -> Answer {
        if ends_session && answer.status() == StatusCode::ACCEPTED {
            *answer.status_mut() = StatusCode::NO_CONTENT;
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use tower_layer::Layer;
    use tower_service::Service;

    use super::*;
    use crate::http::answer::{given, plain};
    use crate::http::check::CheckLayer;

    #[tokio::test]
    async fn a_delete_accepted_is_no_content() {
        let mut service = CheckLayer::new(SessionEnd).layer(tower::service_fn(|_: Request<()>| {
            given(plain(StatusCode::ACCEPTED, ""))
        }));
        for (method, status) in [("DELETE", 204), ("POST", 202)] {
            let request = Request::builder().method(method).body(()).unwrap();
            let answer = Service::call(&mut service, request).await.unwrap();
            assert_eq!(answer.status().as_u16(), status, "{method}");
        }
    }
}
