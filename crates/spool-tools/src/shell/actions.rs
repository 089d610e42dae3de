//! What a command is for, as far as a quick look can tell: reading a file,
//! listing files, searching, or something else. Clients use this to show
//! "Read main.rs" instead of a raw command line; nothing depends on it for
//! safety, so a wrong guess costs only a less helpful label.

use std::path::Path;

use spool_protocol::CommandAction;

use super::args::{Args, parse_args};
use super::format::format_command;
use super::parse::{is_assignment, parse_script, shell_script};
use super::safe::sed_prints_only;
use options::{
    AG_VALUES, BAT_VALUES, EZA_VALUES, FD_VALUES, GIT_GREP_VALUES, GREP_VALUES, HEAD_VALUES,
    LESS_VALUES, LS_VALUES, NL_VALUES, RG_VALUES, TREE_VALUES,
};

mod options;

/// Classifies `argv`, looking inside `bash -lc "…"` scripts: one action per
/// simple command (or per file, for `cat a b`). `cd` steps and output
/// filters at the end of a pipeline (`| head -n 20`) add nothing and are
/// left out. A script this module cannot follow is a single `Unknown`.
pub fn command_actions(argv: &[String]) -> Vec<CommandAction> {
    if argv.is_empty() {
        return Vec::new();
    }
    match shell_script(argv) {
        Some(script) => script_actions(script),
        None => classify(argv, format_command(argv)),
    }
}

fn script_actions(script: &str) -> Vec<CommandAction> {
    let whole = || {
        vec![CommandAction::Unknown {
            command: script.trim().to_owned(),
        }]
    };
    let Some(parsed) = parse_script(script) else {
        return whole();
    };
    if parsed.complex {
        return whole();
    }
    let count = parsed.commands.len();
    let mut actions: Vec<CommandAction> = Vec::new();
    for cmd in &parsed.commands {
        let words: Vec<String> = cmd
            .words
            .iter()
            .map(|w| w.text.clone())
            .skip_while(|w| is_assignment(w))
            .collect();
        let Some(first) = words.first() else { continue };
        if first == "cd" && count > 1 {
            continue;
        }
        if cmd.piped && !actions.is_empty() && is_output_filter(&words) {
            continue;
        }
        for action in classify(&words, script[cmd.span.clone()].to_owned()) {
            if actions.last() != Some(&action) {
                actions.push(action);
            }
        }
    }
    if actions.is_empty() {
        return whole();
    }
    actions
}

fn classify(words: &[String], command: String) -> Vec<CommandAction> {
    let unknown = |command| vec![CommandAction::Unknown { command }];
    let Some((program, args)) = words.split_first() else {
        return unknown(command);
    };
    let actions = match program_name(program) {
        "cat" => read_files(&command, &parse_args(args, &[])),
        "bat" | "batcat" => read_files(&command, &parse_args(args, BAT_VALUES)),
        "less" | "more" => read_files(&command, &parse_args(args, LESS_VALUES)),
        "nl" => read_files(&command, &parse_args(args, NL_VALUES)),
        "head" | "tail" => read_files(&command, &parse_args(args, HEAD_VALUES)),
        "sed" => sed_read(&command, args),
        "ls" => list(&command, &parse_args(args, LS_VALUES)),
        "tree" => list(&command, &parse_args(args, TREE_VALUES)),
        "exa" | "eza" => list(&command, &parse_args(args, EZA_VALUES)),
        "find" => Some(find(&command, args)),
        "fd" | "fdfind" => Some(fd(&command, &parse_args(args, FD_VALUES))),
        "grep" | "egrep" | "fgrep" => {
            Some(search(&command, &parse_args(args, GREP_VALUES), PATTERN))
        }
        "rg" => Some(rg(&command, &parse_args(args, RG_VALUES))),
        "ag" | "ack" => Some(search(&command, &parse_args(args, AG_VALUES), AG_PATTERN)),
        "git" => git(&command, args),
        _ => None,
    };
    actions.unwrap_or_else(|| unknown(command))
}

/// The program's file name: `/usr/bin/rg` is `rg`.
fn program_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned())
}

fn read_files(command: &str, args: &Args<'_>) -> Option<Vec<CommandAction>> {
    // With no file (or `-`) the command reads its input, not a file.
    if args.operands.is_empty() || args.operands.contains(&"-") {
        return None;
    }
    let reads = args.operands.iter().map(|path| CommandAction::Read {
        command: command.to_owned(),
        name: file_name(path),
        path: (*path).to_owned(),
    });
    Some(reads.collect())
}

/// `sed -n '1,200p' file` is how models page through files.
fn sed_read(command: &str, args: &[String]) -> Option<Vec<CommandAction>> {
    let mut parsed = parse_args(args, &["-e", "--expression", "-f", "--file", "-l"]);
    if !parsed.has(&["-n", "--quiet", "--silent"])
        || parsed.has(&["-f", "--file", "-i", "--in-place"])
    {
        return None;
    }
    let scripts: Vec<&str> = match parsed.value(&["-e", "--expression"]) {
        Some(_) => parsed
            .options
            .iter()
            .filter(|o| o.name == "-e" || o.name == "--expression")
            .filter_map(|o| o.value)
            .collect(),
        None if parsed.operands.is_empty() => return None,
        None => vec![parsed.operands.remove(0)],
    };
    if !scripts.iter().all(|s| sed_prints_only(s)) {
        return None;
    }
    read_files(command, &parsed)
}

fn list(command: &str, args: &Args<'_>) -> Option<Vec<CommandAction>> {
    if args.operands.is_empty() {
        return Some(vec![CommandAction::ListFiles {
            command: command.to_owned(),
            path: None,
        }]);
    }
    let lists = args.operands.iter().map(|path| CommandAction::ListFiles {
        command: command.to_owned(),
        path: Some((*path).to_owned()),
    });
    Some(lists.collect())
}

/// `find` has no getopt syntax: paths come first, then an expression.
fn find(command: &str, args: &[String]) -> Vec<CommandAction> {
    let path = args
        .first()
        .filter(|a| !a.starts_with('-') && *a != "(" && *a != "!")
        .cloned();
    const NAME_TESTS: &[&str] = &[
        "-name",
        "-iname",
        "-path",
        "-ipath",
        "-wholename",
        "-iwholename",
        "-regex",
        "-iregex",
        "-lname",
        "-ilname",
    ];
    let query = args
        .windows(2)
        .find(|pair| NAME_TESTS.contains(&pair[0].as_str()))
        .map(|pair| pair[1].clone());
    let command = command.to_owned();
    vec![match query {
        Some(query) => CommandAction::Search {
            command,
            query: Some(query),
            path,
        },
        None => CommandAction::ListFiles { command, path },
    }]
}

fn fd(command: &str, args: &Args<'_>) -> Vec<CommandAction> {
    let command = command.to_owned();
    let path = args
        .operands
        .get(1)
        .copied()
        .or_else(|| args.value(&["--search-path", "--base-directory"]))
        .map(str::to_owned);
    vec![match args.operands.first() {
        // `fd . dir` matches every name: a listing.
        None | Some(&"." | &"") => CommandAction::ListFiles { command, path },
        Some(pattern) => CommandAction::Search {
            command,
            query: Some((*pattern).to_owned()),
            path,
        },
    }]
}

fn rg(command: &str, args: &Args<'_>) -> Vec<CommandAction> {
    if args.has(&["--files"]) {
        return vec![CommandAction::ListFiles {
            command: command.to_owned(),
            path: args.operands.first().map(|p| (*p).to_owned()),
        }];
    }
    search(command, args, PATTERN)
}

/// Where a search tool takes its pattern from when it is not the first
/// operand.
struct PatternOptions {
    /// Options whose value is the pattern.
    given: &'static [&'static str],
    /// Options naming a file of patterns (the query is then unknown).
    from_file: &'static [&'static str],
}

const PATTERN: PatternOptions = PatternOptions {
    given: &["-e", "--regexp"],
    from_file: &["-f", "--file"],
};
/// `ag -g PATTERN` and `ack -g PATTERN` search file names; their `-f` means
/// something else.
const AG_PATTERN: PatternOptions = PatternOptions {
    given: &["-g", "--match"],
    from_file: &[],
};

/// The pattern is the first operand unless given with an option (or read
/// from a file with `-f`, when it is unknown); the path is the operand after
/// it.
fn search(command: &str, args: &Args<'_>, pattern: PatternOptions) -> Vec<CommandAction> {
    let explicit = args.value(pattern.given);
    let from_file = args.has(pattern.from_file);
    let (query, paths) = match (explicit, from_file) {
        (Some(query), _) => (Some(query), &args.operands[..]),
        (None, true) => (None, &args.operands[..]),
        (None, false) => match args.operands.split_first() {
            Some((query, paths)) => (Some(*query), paths),
            None => (None, &args.operands[..]),
        },
    };
    vec![CommandAction::Search {
        command: command.to_owned(),
        query: query.map(str::to_owned),
        path: paths.first().map(|p| (*p).to_owned()),
    }]
}

fn git(command: &str, args: &[String]) -> Option<Vec<CommandAction>> {
    let mut rest = args;
    // Global options before the subcommand.
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "-C" | "-c" => rest = tail.get(1..)?,
            flag if flag.starts_with('-') => rest = tail,
            _ => break,
        }
    }
    let (sub, sub_args) = rest.split_first()?;
    match sub.as_str() {
        "grep" => Some(search(
            command,
            &parse_args(sub_args, GIT_GREP_VALUES),
            PATTERN,
        )),
        "ls-files" => list(command, &parse_args(sub_args, &["-x", "--exclude", "-X"])),
        _ => None,
    }
}

/// Programs that, at the end of a pipeline and without file operands, only
/// trim or count what the command before them produced.
fn is_output_filter(words: &[String]) -> bool {
    let Some((program, args)) = words.split_first() else {
        return false;
    };
    let with_value: &[&str] = match program_name(program) {
        "tr" => return true,
        "head" | "tail" => HEAD_VALUES,
        "wc" | "cat" | "less" | "more" | "nl" => &[],
        "uniq" => &["-f", "-s", "-w"],
        "sort" => &["-k", "-t", "-S", "-T", "--key", "--field-separator"],
        "cut" => &["-d", "-f", "-c", "-b", "--delimiter", "--fields"],
        "column" | "fold" | "fmt" => &["-s", "-c", "-o", "-w"],
        _ => return false,
    };
    parse_args(args, with_value).operands.is_empty()
}

#[cfg(test)]
mod tests;
