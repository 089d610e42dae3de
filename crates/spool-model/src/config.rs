//! Provider configuration and the retry policy.

use std::time::Duration;

/// How an HTTP provider connects and retries.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// A name for errors and logs, e.g. `openai` or `local`.
    pub name: String,
    /// Base URL up to and including the API version, e.g.
    /// `https://api.openai.com/v1`; `/responses` or `/chat/completions` is
    /// appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set. Local servers need none.
    pub api_key: Option<String>,
    /// Extra headers sent with every request (organization, project, …).
    pub headers: Vec<(String, String)>,
    pub retry: RetryPolicy,
    /// Time allowed to establish a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Time allowed from sending the request to the response headers. Local
    /// servers only answer once the prompt is processed, so this is generous.
    pub request_timeout: Duration,
    /// Longest silence allowed between two chunks of the response body.
    pub idle_timeout: Duration,
}

impl ProviderConfig {
    /// A config with default retry policy and timeouts.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        ProviderConfig {
            name: name.into(),
            base_url: base_url.into(),
            api_key: None,
            headers: Vec::new(),
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(300),
        }
    }

    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// `base_url` joined with `path`, without a doubled slash.
    pub(crate) fn endpoint(&self, path: &str) -> String {
        format!("{}/{}", self.base_url.trim_end_matches('/'), path)
    }
}

/// Exponential backoff for failures that happen before any output streamed.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included; 1 disables retries.
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// No single delay exceeds this, `Retry-After` included, so a server
    /// cannot park a turn for an hour.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// `max_attempts` attempts with a tiny delay, so tests run fast.
    pub fn fast(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_secs(5),
        }
    }

    /// The delay before retry number `retry` (1 for the first retry). A
    /// server's `Retry-After` wins over the computed backoff.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.saturating_sub(1)));
        retry_after.unwrap_or(backoff).min(self.max_delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(1),
        };
        assert_eq!(p.delay(1, None), Duration::from_millis(250));
        assert_eq!(p.delay(2, None), Duration::from_millis(500));
        assert_eq!(p.delay(3, None), Duration::from_secs(1));
        assert_eq!(p.delay(40, None), Duration::from_secs(1));
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(700))),
            Duration::from_millis(700)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(60))),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn endpoint_joins_without_double_slash() {
        let c = ProviderConfig::new("x", "http://h/v1/");
        assert_eq!(c.endpoint("responses"), "http://h/v1/responses");
    }
}
