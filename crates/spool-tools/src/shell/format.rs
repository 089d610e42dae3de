//! Rendering an argv as one line a person can paste into a POSIX shell.

use std::borrow::Cow;
use std::fmt::Write;

/// `argv` as a shell command line that runs the same program with the same
/// arguments. Words are quoted only when the shell would otherwise change
/// them; control characters (newlines, tabs, escapes) use `$'…'` so the
/// result stays on one line.
pub fn format_command(argv: &[String]) -> String {
    argv.iter()
        .map(|arg| quote(arg))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Characters no POSIX shell gives a meaning to inside a word. `~` and `#`
/// are missing on purpose: they are special at the start of a word.
fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '_' | '-' | '+' | '=' | ':' | ',' | '.' | '/' | '@' | '%')
}

fn quote(arg: &str) -> Cow<'_, str> {
    if !arg.is_empty() && arg.chars().all(is_plain) {
        return Cow::Borrowed(arg);
    }
    if arg.chars().any(char::is_control) {
        return Cow::Owned(ansi_c_quote(arg));
    }
    Cow::Owned(format!("'{}'", arg.replace('\'', r"'\''")))
}

fn ansi_c_quote(arg: &str) -> String {
    let mut out = String::from("$'");
    for c in arg.chars() {
        match c {
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            '\r' => out.push_str(r"\r"),
            '\\' => out.push_str(r"\\"),
            '\'' => out.push_str(r"\'"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(args: &[&str]) -> String {
        format_command(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn plain_words_are_left_alone() {
        assert_eq!(
            fmt(&["ls", "-la", "src/main.rs", "--color=auto", "a,b:c@d%e+f"]),
            "ls -la src/main.rs --color=auto a,b:c@d%e+f"
        );
    }

    #[test]
    fn words_the_shell_would_change_are_single_quoted() {
        assert_eq!(
            fmt(&["echo", "a b", "$HOME", "*.rs", "~", "#x", "a;b", "é"]),
            "echo 'a b' '$HOME' '*.rs' '~' '#x' 'a;b' 'é'"
        );
        assert_eq!(fmt(&["echo", ""]), "echo ''");
        assert_eq!(fmt(&["echo", "it's"]), r"echo 'it'\''s'");
    }

    #[test]
    fn control_characters_keep_it_on_one_line() {
        assert_eq!(
            fmt(&["printf", "a\nb\t'c'\x1b"]),
            r"printf $'a\nb\t\'c\'\x1b'"
        );
        assert_eq!(fmt(&["echo", "\u{85}"]), r"echo $'\u0085'");
    }

    #[test]
    fn empty_argv_is_empty() {
        assert_eq!(format_command(&[]), "");
    }
}
