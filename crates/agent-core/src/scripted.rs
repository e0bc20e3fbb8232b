//! A model that plays a script: for tests, demos and examples.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use crate::{Message, Model, ModelError, ModelRequest, ModelResponse, TextSink};

type Turn = Box<dyn Fn(&ModelRequest) -> Result<ModelResponse, ModelError> + Send + Sync>;

enum Script {
    Turns(Mutex<VecDeque<ModelResponse>>),
    Function(Turn),
}

/// A [`Model`] that answers from a script: a list of turns, played in order, or a function of
/// the request. It records every request it is asked, and streams its text word by word.
///
/// ```
/// use agent_core::{Message, Model, ModelRequest, ScriptedModel};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let model = ScriptedModel::new([Message::assistant("hello")]);
/// let answer = model.complete(ModelRequest::new(vec![], vec![])).await.unwrap();
/// assert_eq!(answer.message.content, "hello");
/// // Out of turns: an error, not a panic.
/// assert!(model.complete(ModelRequest::new(vec![], vec![])).await.is_err());
/// assert_eq!(model.requests().len(), 2);
/// # });
/// ```
pub struct ScriptedModel {
    script: Script,
    requests: Mutex<Vec<ModelRequest>>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let script = match &self.script {
            Script::Turns(turns) => format!(
                "{} turns left",
                turns.lock().unwrap_or_else(PoisonError::into_inner).len()
            ),
            Script::Function(_) => "a function".into(),
        };
        f.debug_struct("ScriptedModel")
            .field("script", &script)
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// A model answering with `turns`, one per request, in order.
    pub fn new(turns: impl IntoIterator<Item = Message>) -> Self {
        Self::from_responses(turns.into_iter().map(ModelResponse::new))
    }

    /// A model answering with `responses` (with usage, say), one per request, in order.
    pub fn from_responses(responses: impl IntoIterator<Item = ModelResponse>) -> Self {
        Self {
            script: Script::Turns(Mutex::new(responses.into_iter().collect())),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// A model answering each request with `answer(request)`.
    ///
    /// ```
    /// use agent_core::{Message, ModelResponse, ScriptedModel};
    ///
    /// let echo = ScriptedModel::from_fn(|request| {
    ///     let last = request.messages.last().map(|m| m.content.clone()).unwrap_or_default();
    ///     Ok(ModelResponse::new(Message::assistant(last)))
    /// });
    /// # let _ = echo;
    /// ```
    pub fn from_fn(
        answer: impl Fn(&ModelRequest) -> Result<ModelResponse, ModelError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            script: Script::Function(Box::new(answer)),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Every request asked so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl Model for ScriptedModel {
    async fn complete(&self, request: ModelRequest) -> Result<ModelResponse, ModelError> {
        let answer = match &self.script {
            Script::Turns(turns) => turns
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front()
                .ok_or_else(|| ModelError::Unusable("the script has no more turns".into())),
            Script::Function(answer) => answer(&request),
        };
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        answer
    }

    async fn complete_streaming(
        &self,
        request: ModelRequest,
        text: &dyn TextSink,
    ) -> Result<ModelResponse, ModelError> {
        let response = self.complete(request).await?;
        for word in response.message.content.split_inclusive(' ') {
            text.text(word);
        }
        Ok(response)
    }
}
