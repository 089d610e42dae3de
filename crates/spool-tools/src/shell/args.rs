//! Reading a program's command line the way getopt-style tools do, given
//! which options take a value. Knowing that is what keeps `grep -e x -A 3
//! foo src` from being read as a search for `3` in `foo`.

/// One option as written: `-n` (also from a cluster like `-rn`) or
/// `--lines`, with its value if it takes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Opt<'a> {
    pub name: String,
    pub value: Option<&'a str>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Args<'a> {
    pub options: Vec<Opt<'a>>,
    pub operands: Vec<&'a str>,
}

impl<'a> Args<'a> {
    pub(crate) fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|o| names.contains(&o.name.as_str()))
    }

    /// The value of the first of `names` that was given with one.
    pub(crate) fn value(&self, names: &[&str]) -> Option<&'a str> {
        self.options
            .iter()
            .find(|o| names.contains(&o.name.as_str()))
            .and_then(|o| o.value)
    }
}

/// Splits `args` into options and operands. `with_value` lists the options
/// (short `-x` or long `--xyz`) that consume a value, either attached
/// (`-n5`, `--lines=5`) or as the next argument. Options may follow
/// operands, as GNU tools allow; `--` ends the options.
pub(crate) fn parse_args<'a>(args: &'a [String], with_value: &[&str]) -> Args<'a> {
    let mut out = Args::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            out.operands.extend(rest.map(String::as_str));
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (format!("--{name}"), Some(value)),
                None if with_value.contains(&arg.as_str()) => {
                    (arg.clone(), rest.next().map(String::as_str))
                }
                None => (arg.clone(), None),
            };
            out.options.push(Opt { name, value });
            continue;
        }
        let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
            out.operands.push(arg);
            continue;
        };
        for (i, c) in cluster.char_indices() {
            let name = format!("-{c}");
            if with_value.contains(&name.as_str()) {
                let attached = &cluster[i + c.len_utf8()..];
                let value = if attached.is_empty() {
                    rest.next().map(String::as_str)
                } else {
                    Some(attached)
                };
                out.options.push(Opt { name, value });
                break;
            }
            out.options.push(Opt { name, value: None });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    fn opt<'a>(name: &str, value: Option<&'a str>) -> Opt<'a> {
        Opt {
            name: name.to_owned(),
            value,
        }
    }

    #[test]
    fn values_attached_or_separate() {
        let args = strings(&[
            "-rn",
            "-A3",
            "-e",
            "pat",
            "--max-count=2",
            "--glob",
            "*.rs",
            "src",
        ]);
        let parsed = parse_args(&args, &["-A", "-e", "--glob", "--max-count"]);
        assert_eq!(
            parsed.options,
            vec![
                opt("-r", None),
                opt("-n", None),
                opt("-A", Some("3")),
                opt("-e", Some("pat")),
                opt("--max-count", Some("2")),
                opt("--glob", Some("*.rs")),
            ]
        );
        assert_eq!(parsed.operands, vec!["src"]);
        assert_eq!(parsed.value(&["-e", "--regexp"]), Some("pat"));
        assert!(parsed.has(&["-n"]));
    }

    #[test]
    fn double_dash_and_lone_dash_are_operands() {
        let args = strings(&["-n", "-", "--", "-x", "y"]);
        let parsed = parse_args(&args, &[]);
        assert_eq!(parsed.operands, vec!["-", "-x", "y"]);
        assert_eq!(parsed.options, vec![opt("-n", None)]);
    }

    #[test]
    fn a_missing_value_is_none() {
        let args = strings(&["-n"]);
        assert_eq!(parse_args(&args, &["-n"]).options, vec![opt("-n", None)]);
    }
}
