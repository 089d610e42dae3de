//! A small, deliberately incomplete reader for the shell scripts models put
//! in `bash -lc "…"`: enough to split a script into simple commands and to
//! notice every construct it does not understand.
//!
//! Both users of this module only need a conservative answer. Anything that
//! would make the words a program receives differ from the words written
//! (substitutions, expansions, control flow) is flagged rather than
//! interpreted, and callers treat flagged scripts as opaque.

use std::ops::Range;
use std::path::Path;

/// A word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    pub text: String,
    /// The shell would turn this word into something else at run time
    /// (`$VAR`, brace expansion, or a glob that could match a name starting
    /// with `-`), so `text` is not what the program receives.
    pub dynamic: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    pub words: Vec<Word>,
    /// Reads the previous command's output through `|`.
    pub piped: bool,
    /// Where the command, including its redirections, sits in the script.
    pub span: Range<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Script {
    pub commands: Vec<SimpleCommand>,
    /// Any `<`, `>` or `>&` redirection (their targets are not in `words`).
    pub redirects: bool,
    /// A command run in the background with `&`.
    pub background: bool,
    /// Something this reader does not model: command or process
    /// substitution, subshells, here-documents, control-flow keywords.
    pub complex: bool,
}

const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash"];

/// Words that start compound commands; a script using them is not a flat
/// list of simple commands.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "select", "function", "{", "}", "[[", "]]", "!", "coproc", "time",
];

/// The script of `bash -lc SCRIPT`, `sh -c SCRIPT` and the like, or `None`
/// when `argv` is not such an invocation (including when it passes extra
/// positional arguments to the script).
pub(crate) fn shell_script(argv: &[String]) -> Option<&str> {
    let (shell, rest) = argv.split_first()?;
    let name = Path::new(shell).file_name()?.to_str()?;
    if !SHELLS.contains(&name) {
        return None;
    }
    let (script, flags) = rest.split_last()?;
    let mut saw_c = false;
    for flag in flags {
        let letters = flag.strip_prefix('-')?;
        if letters.is_empty() || !letters.chars().all(|c| matches!(c, 'c' | 'l' | 'e')) {
            return None;
        }
        saw_c |= letters.contains('c');
    }
    saw_c.then_some(script.as_str())
}

/// `NAME=value` as the shell reads it before a command name.
pub(crate) fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Splits `script` into simple commands. `None` when quoting is unbalanced,
/// which the shell itself would reject.
pub(crate) fn parse_script(script: &str) -> Option<Script> {
    let mut p = Parser {
        src: script,
        pos: 0,
        out: Script::default(),
        words: Vec::new(),
        word: None,
        piped: false,
        start: None,
        end: 0,
        redirect_target: false,
    };
    p.run()?;
    let out = &mut p.out;
    for cmd in &out.commands {
        let first = cmd.words.iter().find(|w| !is_assignment(&w.text));
        if first.is_some_and(|w| RESERVED.contains(&w.text.as_str())) {
            out.complex = true;
        }
    }
    Some(p.out)
}

struct WordBuf {
    text: String,
    dynamic: bool,
    /// Only unquoted digits so far: `2` in `2>` names a file descriptor.
    fd_like: bool,
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    out: Script,
    words: Vec<Word>,
    word: Option<WordBuf>,
    piped: bool,
    /// Span of the command being read.
    start: Option<usize>,
    end: usize,
    /// The next word is the target of a redirection, not an argument.
    redirect_target: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(c);
        if hit {
            self.pos += c.len_utf8();
        }
        hit
    }

    /// The word being built, starting one at `at` if needed.
    fn word(&mut self, at: usize) -> &mut WordBuf {
        self.start.get_or_insert(at);
        self.word.get_or_insert(WordBuf {
            text: String::new(),
            dynamic: false,
            fd_like: true,
        })
    }

    fn push_quoted(&mut self, at: usize, c: char) {
        let w = self.word(at);
        w.text.push(c);
        w.fd_like = false;
    }

    /// Ends the word being built; `end` is where its last character ended.
    fn finish_word(&mut self, end: usize) {
        if let Some(w) = self.word.take() {
            self.end = end;
            if std::mem::take(&mut self.redirect_target) {
                return;
            }
            self.words.push(Word {
                text: w.text,
                dynamic: w.dynamic,
            });
        }
    }

    /// Ends the current simple command; `piped` says whether the next one
    /// reads its output.
    fn finish_command(&mut self, end: usize, piped_next: bool) {
        self.finish_word(end);
        if std::mem::take(&mut self.redirect_target) {
            // `cat >` with nothing after it; the shell rejects this.
            self.out.complex = true;
        }
        if let Some(start) = self.start.take() {
            self.out.commands.push(SimpleCommand {
                words: std::mem::take(&mut self.words),
                piped: self.piped,
                span: start..self.end,
            });
        }
        self.piped = piped_next;
    }

    fn run(&mut self) -> Option<()> {
        while let Some(c) = self.peek() {
            let at = self.pos;
            self.bump();
            match c {
                ' ' | '\t' | '\r' => self.finish_word(at),
                '\n' | ';' => self.finish_command(at, false),
                '#' if self.word.is_none() => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                '\\' => match self.bump() {
                    Some('\n') => {}
                    Some(c) => self.push_quoted(at, c),
                    None => self.push_quoted(at, '\\'),
                },
                '\'' => {
                    self.word(at).fd_like = false;
                    loop {
                        match self.bump()? {
                            '\'' => break,
                            c => self.push_quoted(at, c),
                        }
                    }
                }
                '"' => self.double_quoted(at)?,
                '`' => self.out.complex = true,
                '$' => {
                    if self.peek() == Some('(') {
                        self.out.complex = true;
                    }
                    let w = self.word(at);
                    w.text.push('$');
                    w.dynamic = true;
                    w.fd_like = false;
                }
                '*' | '?' | '[' => {
                    let w = self.word(at);
                    // Only a literal prefix that cannot start an option keeps
                    // the expansion from being read as one.
                    if w.text.is_empty() || w.text.starts_with('-') {
                        w.dynamic = true;
                    }
                    w.text.push(c);
                    w.fd_like = false;
                }
                '{' | '}' => {
                    let w = self.word(at);
                    w.text.push(c);
                    w.dynamic = true;
                    w.fd_like = false;
                }
                '(' | ')' => {
                    self.out.complex = true;
                    self.finish_word(at);
                }
                '&' if self.eat('&') => self.finish_command(at, false),
                '&' if self.peek() == Some('>') => {
                    self.finish_word(at);
                    self.bump();
                    self.eat('>');
                    self.redirect(at);
                }
                '&' => {
                    self.out.background = true;
                    self.finish_command(at, false);
                }
                '|' if self.eat('|') => self.finish_command(at, false),
                '|' => {
                    self.eat('&');
                    self.finish_command(at, true);
                }
                '<' | '>' => {
                    if self.word.as_ref().is_some_and(|w| w.fd_like) {
                        self.word = None;
                    } else {
                        self.finish_word(at);
                    }
                    if c == '<' && self.peek() == Some('<') {
                        self.bump();
                        // `<<<` is a here-string (a word); `<<` a here-document.
                        if !self.eat('<') {
                            self.out.complex = true;
                        }
                    } else if self.peek() == Some('(') {
                        self.out.complex = true;
                    } else {
                        let _ = self.eat('>') || self.eat('&') || self.eat('|');
                    }
                    self.redirect(at);
                }
                c => {
                    let w = self.word(at);
                    w.text.push(c);
                    w.fd_like &= c.is_ascii_digit();
                }
            }
        }
        self.finish_command(self.pos, false);
        Some(())
    }

    fn redirect(&mut self, at: usize) {
        self.start.get_or_insert(at);
        self.end = self.pos;
        self.out.redirects = true;
        self.redirect_target = true;
    }

    fn double_quoted(&mut self, at: usize) -> Option<()> {
        self.word(at).fd_like = false;
        loop {
            match self.bump()? {
                '"' => return Some(()),
                '\\' => match self.bump()? {
                    '\n' => {}
                    c @ ('$' | '`' | '"' | '\\') => self.push_quoted(at, c),
                    c => {
                        self.push_quoted(at, '\\');
                        self.push_quoted(at, c);
                    }
                },
                '`' => self.out.complex = true,
                '$' => {
                    if self.peek() == Some('(') {
                        self.out.complex = true;
                    }
                    self.push_quoted(at, '$');
                    self.word(at).dynamic = true;
                }
                c => self.push_quoted(at, c),
            }
        }
    }
}

#[cfg(test)]
mod tests;
