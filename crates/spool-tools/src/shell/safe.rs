//! Commands that can run without asking: ones that only read.
//!
//! This is an allowlist. Every rule errs towards "not known safe", since
//! the cost of a wrong "no" is one approval prompt and the cost of a wrong
//! "yes" is a command nobody agreed to.

use super::args::parse_args;
use super::parse::{is_assignment, parse_script, shell_script};

/// True only when `argv` is known to just read: a small set of programs with
/// their writing or executing options excluded, or a `bash -lc` script made
/// only of such commands joined by `&&`, `||`, `;` or `|`, with no
/// redirection, substitution, background job or expansion that could change
/// what the programs receive.
pub fn is_known_safe(argv: &[String]) -> bool {
    match shell_script(argv) {
        Some(script) => is_system_program(&argv[0]) && script_is_safe(script),
        None => command_is_safe(argv),
    }
}

/// A bare name (found on PATH) or one in the system directories; `./bash`
/// could be anything.
fn is_system_program(path: &str) -> bool {
    let name = ["/bin/", "/usr/bin/"]
        .iter()
        .find_map(|dir| path.strip_prefix(dir))
        .unwrap_or(path);
    !name.contains('/')
}

fn script_is_safe(script: &str) -> bool {
    let Some(parsed) = parse_script(script) else {
        return false;
    };
    if parsed.complex || parsed.redirects || parsed.background || parsed.commands.is_empty() {
        return false;
    }
    parsed.commands.iter().all(|cmd| {
        // `PAGER=… git log` or `LD_PRELOAD=…` can make anything run.
        let assigns = cmd.words.first().is_some_and(|w| is_assignment(&w.text));
        let words: Vec<String> = cmd.words.iter().map(|w| w.text.clone()).collect();
        !assigns && cmd.words.iter().all(|w| !w.dynamic) && command_is_safe(&words)
    })
}

fn command_is_safe(argv: &[String]) -> bool {
    let Some((program, args)) = argv.split_first() else {
        return false;
    };
    match program.as_str() {
        "ls" | "cat" | "head" | "tail" | "wc" | "pwd" | "echo" | "true" | "which" | "stat"
        | "nl" | "grep" | "egrep" | "fgrep" => true,
        "file" => file_is_safe(args),
        "tree" => tree_is_safe(args),
        "rg" => rg_is_safe(args),
        "find" => find_is_safe(args),
        "sed" => sed_is_safe(args),
        "git" => git_is_safe(args),
        _ => false,
    }
}

/// `file -C` writes a compiled magic file and `-z` may run decompressors;
/// getopt also accepts abbreviations (`--comp`), so only listed options
/// pass.
fn file_is_safe(args: &[String]) -> bool {
    const ALLOWED: &[&str] = &[
        "-b",
        "--brief",
        "-i",
        "--mime",
        "--mime-type",
        "--mime-encoding",
        "-L",
        "--dereference",
        "-h",
        "--no-dereference",
        "-k",
        "--keep-going",
        "-N",
        "--no-pad",
        "-0",
        "--print0",
        "-r",
        "--raw",
        "-s",
        "--special-files",
        "-E",
        "--extension",
        "--apple",
    ];
    parse_args(args, &[])
        .options
        .iter()
        .all(|o| ALLOWED.contains(&o.name.as_str()))
}

/// `tree -o FILE` writes its listing to a file and `-R` writes one per
/// directory. tree reads a value-taking option's value from the next
/// argument even in a cluster (`-Lo 2 out`), so any short cluster holding
/// `o` or `R` is refused.
fn tree_is_safe(args: &[String]) -> bool {
    !args.iter().any(|a| {
        if a.starts_with("--") {
            a.starts_with("--output")
        } else {
            a.starts_with('-') && a.contains(['o', 'R'])
        }
    })
}

/// ripgrep's short options that take a value. Listing a flag here would
/// hide whatever follows it in a cluster, so only real ones belong.
const RG_SHORT_VALUES: &[&str] = &[
    "-A", "-B", "-C", "-d", "-E", "-e", "-f", "-g", "-j", "-M", "-m", "-r", "-t", "-T",
];

/// `--pre` and `--hostname-bin` run a program; `-z` runs decompressors.
fn rg_is_safe(args: &[String]) -> bool {
    let parsed = parse_args(args, RG_SHORT_VALUES);
    !parsed.options.iter().any(|o| {
        matches!(
            o.name.as_str(),
            "--pre" | "--pre-glob" | "--hostname-bin" | "--search-zip" | "-z"
        )
    })
}

fn find_is_safe(args: &[String]) -> bool {
    !args.iter().any(|a| {
        matches!(
            a.as_str(),
            "-exec" | "-execdir" | "-ok" | "-okdir" | "-delete" | "-fls"
        ) || a.starts_with("-fprint")
    })
}

/// Options of GNU sed that neither write files nor load scripts from them.
const SED_ALLOWED: &[&str] = &[
    "-n",
    "--quiet",
    "--silent",
    "-e",
    "--expression",
    "-E",
    "-r",
    "--regexp-extended",
    "-s",
    "--separate",
    "-u",
    "--unbuffered",
    "-z",
    "--null-data",
    "--posix",
    "--sandbox",
    "-l",
    "--line-length",
    "--debug",
];

/// Only `sed -n` with print-only scripts: no `-i`, no `w`/`e`/`r` commands
/// and no `s///` (whose flags can write or execute).
fn sed_is_safe(args: &[String]) -> bool {
    let mut parsed = parse_args(args, &["-e", "--expression", "-l", "--line-length"]);
    if !parsed
        .options
        .iter()
        .all(|o| SED_ALLOWED.contains(&o.name.as_str()))
        || !parsed.has(&["-n", "--quiet", "--silent"])
    {
        return false;
    }
    let scripts: Vec<&str> = parsed
        .options
        .iter()
        .filter(|o| o.name == "-e" || o.name == "--expression")
        .map(|o| o.value.unwrap_or(""))
        .collect();
    if scripts.is_empty() {
        if parsed.operands.is_empty() {
            return false;
        }
        return sed_prints_only(parsed.operands.remove(0));
    }
    scripts.iter().all(|s| sed_prints_only(s))
}

/// A sed script made only of (optionally addressed and negated) `p`, `=`
/// and `q` commands, e.g. `1,200p`, `/start/,$p`, `10q`.
pub(crate) fn sed_prints_only(script: &str) -> bool {
    let mut rest = script;
    loop {
        rest = rest.trim_start_matches([' ', '\t', '\n', ';']);
        if rest.is_empty() {
            return true;
        }
        let Some(after) = sed_command(rest) else {
            return false;
        };
        let after = after.trim_start_matches([' ', '\t']);
        if !(after.is_empty() || after.starts_with([';', '\n'])) {
            return false;
        }
        rest = after;
    }
}

/// One addressed command; returns what follows it.
fn sed_command(s: &str) -> Option<&str> {
    let mut rest = s;
    if let Some(after) = sed_address(rest, false) {
        rest = after;
        if let Some(second) = rest.strip_prefix(',') {
            rest = sed_address(second, true)?;
        }
    }
    rest = rest.trim_start_matches([' ', '\t']);
    if let Some(negated) = rest.strip_prefix('!') {
        rest = negated.trim_start_matches([' ', '\t']);
    }
    let mut chars = rest.chars();
    match chars.next()? {
        'p' | '=' => Some(chars.as_str()),
        'q' | 'Q' => Some(
            chars
                .as_str()
                .trim_start_matches(|c: char| c.is_ascii_digit()),
        ),
        _ => None,
    }
}

/// A line number, `first~step`, `$`, or `/regex/` (with `I`/`M` flags); the
/// second address of a range may also be `+N` or `~N`.
fn sed_address(s: &str, second: bool) -> Option<&str> {
    if let Some(rest) = skip_digits(s) {
        return Some(rest.strip_prefix('~').and_then(skip_digits).unwrap_or(rest));
    }
    if let Some(rest) = s.strip_prefix('$') {
        return Some(rest);
    }
    if second && let Some(rest) = s.strip_prefix(['+', '~']) {
        return skip_digits(rest);
    }
    let mut chars = s.strip_prefix('/')?.char_indices();
    let body = &s[1..];
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\n' => return None,
            '/' => return Some(body[i + 1..].trim_start_matches(['I', 'M'])),
            _ => {}
        }
    }
    None
}

/// What follows a run of at least one digit.
fn skip_digits(s: &str) -> Option<&str> {
    let rest = s.trim_start_matches(|c: char| c.is_ascii_digit());
    (rest.len() < s.len()).then_some(rest)
}

fn git_is_safe(args: &[String]) -> bool {
    // `-c`, `-C`, `--git-dir` and the like can point git at other
    // configuration, which can name programs to run.
    let mut rest = args;
    while let Some(tail) = rest.strip_prefix(&["--no-pager".to_owned()][..]) {
        rest = tail;
    }
    let Some((sub, args)) = rest.split_first() else {
        return false;
    };
    match sub.as_str() {
        "status" => true,
        "log" | "diff" | "show" => !args.iter().any(|a| {
            let name = a.split_once('=').map_or(a.as_str(), |(name, _)| name);
            // git accepts unambiguous prefixes of long options.
            let abbreviates = |long: &str| name.len() >= 4 && long.starts_with(name);
            name.starts_with("--output")
                || abbreviates("--output")
                || abbreviates("--ext-diff")
                || abbreviates("--textconv")
        }),
        "branch" => branch_lists_only(args),
        // `-O` opens the matches in a pager (any program).
        "grep" => !args.iter().any(|a| {
            let name = a.split_once('=').map_or(a.as_str(), |(name, _)| name);
            if name.starts_with("--") {
                name.len() >= 4 && "--open-files-in-pager".starts_with(name)
            } else {
                name.starts_with('-') && name.contains('O')
            }
        }),
        _ => false,
    }
}

/// `git branch` creates, renames and deletes too; only listing is safe.
fn branch_lists_only(args: &[String]) -> bool {
    const LISTING: &[&str] = &[
        "--list",
        "-l",
        "-a",
        "--all",
        "-r",
        "--remotes",
        "-v",
        "--verbose",
        "--show-current",
        "--color",
        "--no-color",
        "--column",
        "--no-column",
    ];
    let parsed = parse_args(args, &[]);
    let listing = parsed
        .options
        .iter()
        .all(|o| LISTING.contains(&o.name.as_str()));
    // Names are patterns with `--list`; without it they create branches.
    listing && (parsed.operands.is_empty() || parsed.has(&["--list", "-l"]))
}

#[cfg(test)]
mod tests;
