//! Secrets stay out of the commands a model runs.
//!
//! A command inherits spool's environment, which holds the provider's API
//! key, the server's auth token and whatever else the operator exported.
//! A model that runs `env` would read them, and could send them anywhere
//! the command can reach. So names that look like secrets are removed from
//! a command's environment unless the operator passes them through by name.

/// Whether an environment variable's name looks like it holds a secret:
/// `*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, credentials, cloud
/// providers' variables, and the SSH agent's socket (a way to use keys
/// without reading them).
pub fn is_secret_name(name: &str) -> bool {
    const SUFFIXES: [&str; 10] = [
        "_KEY",
        "_KEYS",
        "_TOKEN",
        "_TOKENS",
        "_SECRET",
        "_SECRETS",
        "_PASSWORD",
        "_PASSWD",
        "_CREDENTIALS",
        "_PAT",
    ];
    const PREFIXES: [&str; 4] = ["AWS_", "AZURE_", "GOOGLE_APPLICATION_", "OPENAI_"];
    const EXACT: [&str; 4] = ["SSH_AUTH_SOCK", "GPG_AGENT_INFO", "NETRC", "PGPASSWORD"];
    let upper = name.to_ascii_uppercase();
    SUFFIXES.iter().any(|s| upper.ends_with(s))
        || PREFIXES.iter().any(|p| upper.starts_with(p))
        || EXACT.contains(&upper.as_str())
        || upper.contains("SECRET")
        || upper.contains("API_KEY")
}

/// The names to remove from a command's environment: those of `names` that
/// look like secrets or are in `also_secret` (the provider's key variable,
/// whatever its name), except the ones in `pass_through`.
pub fn names_to_remove<'a>(
    names: impl IntoIterator<Item = &'a str>,
    also_secret: &[String],
    pass_through: &[String],
) -> Vec<String> {
    names
        .into_iter()
        .filter(|name| is_secret_name(name) || also_secret.iter().any(|s| s == name))
        .filter(|name| !pass_through.iter().any(|p| p == name))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_removed_unless_passed_through() {
        for name in [
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_PROFILE",
            "SPOOL_AUTH_TOKEN",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "my_client_secret",
            "SSH_AUTH_SOCK",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "KEYBOARD",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
        let removed = names_to_remove(
            ["PATH", "GITHUB_TOKEN", "LLM_CRED", "NPM_TOKEN"],
            &["LLM_CRED".to_owned()],
            &["NPM_TOKEN".to_owned()],
        );
        assert_eq!(removed, ["GITHUB_TOKEN", "LLM_CRED"]);
    }
}
