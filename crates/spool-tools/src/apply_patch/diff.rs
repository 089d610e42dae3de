//! A small line diff producing unified-diff text for previews and items.
//!
//! Common leading and trailing lines are stripped first (edits from a patch
//! are usually local), then Myers' greedy algorithm finds a shortest edit
//! script for the middle. Its cost is O((N+M)·D) time and O(D²) memory for
//! D edits, so D is capped (memory stays under ~8 MB); past the cap the
//! remaining middle is shown as removed-then-added, which is still a
//! correct (if longer) diff.

/// Lines of context around each hunk.
const CONTEXT: usize = 3;
/// Upper bound on edit distance explored before giving up on minimality.
const MAX_EDITS: usize = 1_000;
/// Upper bound on (N+M)·D, the work of the search.
const MAX_WORK: usize = 50_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Equal,
    Delete,
    Insert,
}

/// A unified diff of `old` → `new` with `--- {old_name}` / `+++ {new_name}`
/// headers and 3 lines of context; empty if the texts are equal. Lines keep
/// their own terminators, so a change of line ending or of the final newline
/// shows up (the latter with `\ No newline at end of file`).
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let script = edit_script(&a, &b);
    if script.iter().all(|op| *op == Op::Equal) {
        return String::new();
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    // Positions in `a` and `b` before each op, to slice hunks and number them.
    let mut pos = Vec::with_capacity(script.len() + 1);
    let (mut i, mut j) = (0, 0);
    for op in &script {
        pos.push((i, j));
        match op {
            Op::Equal => (i, j) = (i + 1, j + 1),
            Op::Delete => i += 1,
            Op::Insert => j += 1,
        }
    }
    pos.push((i, j));

    let changed: Vec<usize> = (0..script.len())
        .filter(|&k| script[k] != Op::Equal)
        .collect();
    let mut g = 0;
    while g < changed.len() {
        // Grow the hunk while the next change is within 2·CONTEXT equal ops.
        let mut last = g;
        while last + 1 < changed.len() && changed[last + 1] - changed[last] <= 2 * CONTEXT + 1 {
            last += 1;
        }
        let start = changed[g].saturating_sub(CONTEXT);
        let end = (changed[last] + 1 + CONTEXT).min(script.len());
        let ((a0, b0), (a1, b1)) = (pos[start], pos[end]);
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(a0, a1 - a0),
            range(b0, b1 - b0)
        ));
        for k in start..end {
            let (i, j) = pos[k];
            let (sign, line) = match script[k] {
                Op::Equal => (' ', a[i]),
                Op::Delete => ('-', a[i]),
                Op::Insert => ('+', b[j]),
            };
            out.push(sign);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
        g = last + 1;
    }
    out
}

/// `start,len` in unified-diff form: 1-based, or the line before when empty.
fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        _ => format!("{},{}", start + 1, len),
    }
}

/// Pairs `(i, j)` with `a[i] == b[j]` in a longest common subsequence.
pub(crate) fn common_lines(a: &[&str], b: &[&str]) -> Vec<(usize, usize)> {
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    for op in edit_script(a, b) {
        match op {
            Op::Equal => {
                pairs.push((i, j));
                i += 1;
                j += 1;
            }
            Op::Delete => i += 1,
            Op::Insert => j += 1,
        }
    }
    pairs
}

fn edit_script(a: &[&str], b: &[&str]) -> Vec<Op> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut script = vec![Op::Equal; prefix];
    let total = ma.len() + mb.len();
    let max_d = total.min(MAX_EDITS).min(MAX_WORK / total.max(1));
    match myers(ma, mb, max_d) {
        Some(middle) => script.extend(middle),
        None => {
            script.extend(std::iter::repeat_n(Op::Delete, ma.len()));
            script.extend(std::iter::repeat_n(Op::Insert, mb.len()));
        }
    }
    script.extend(std::iter::repeat_n(Op::Equal, suffix));
    script
}

/// Myers' shortest edit script, or `None` if it needs more than `max_d`
/// edits.
fn myers(a: &[&str], b: &[&str], max_d: usize) -> Option<Vec<Op>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let off = max_d as isize + 1;
    // v[k + off]: furthest x reached on diagonal k = x - y.
    let mut v = vec![0isize; 2 * max_d + 3];
    // trace[d]: v over diagonals -d..=d as it was before step d.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut found = None;
    'search: for d in 0..=max_d as isize {
        trace.push(v[(off - d) as usize..=(off + d) as usize].to_vec());
        for k in (-d..=d).step_by(2) {
            let down = k == -d || (k != d && v[(off + k - 1) as usize] < v[(off + k + 1) as usize]);
            let mut x = if down {
                v[(off + k + 1) as usize]
            } else {
                v[(off + k - 1) as usize] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[(off + k) as usize] = x;
            if x >= n && y >= m {
                found = Some(d);
                break 'search;
            }
        }
    }
    let d_total = found?;

    // Walk back from (n, m), one edit per step, collecting ops in reverse.
    let mut ops = Vec::with_capacity(a.len() + b.len());
    let (mut x, mut y) = (n, m);
    for d in (1..=d_total).rev() {
        let prev = &trace[d as usize];
        let at = |k: isize| prev[(k + d) as usize];
        let k = x - y;
        let down = k == -d || (k != d && at(k - 1) < at(k + 1));
        let pk = if down { k + 1 } else { k - 1 };
        let px = at(pk);
        let py = px - pk;
        // One edit leads from (px, py) to column `mid_x`, then a run of
        // equal lines (the snake) leads to (x, y).
        let mid_x = if down { px } else { px + 1 };
        while x > mid_x {
            ops.push(Op::Equal);
            x -= 1;
        }
        ops.push(if down { Op::Insert } else { Op::Delete });
        (x, y) = (px, py);
    }
    ops.extend(std::iter::repeat_n(Op::Equal, x as usize));
    ops.reverse();
    Some(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rebuilds `b` from `a` and the script, checking the script is valid.
    fn replay<'a>(a: &[&'a str], b: &[&'a str], script: &[Op]) -> Vec<&'a str> {
        let (mut i, mut j, mut out) = (0, 0, Vec::new());
        for op in script {
            match op {
                Op::Equal => {
                    assert_eq!(a[i], b[j]);
                    out.push(a[i]);
                    i += 1;
                    j += 1;
                }
                Op::Delete => i += 1,
                Op::Insert => {
                    out.push(b[j]);
                    j += 1;
                }
            }
        }
        assert_eq!(i, a.len());
        out
    }

    fn lcs_len(a: &[&str], b: &[&str]) -> usize {
        let mut dp = vec![vec![0; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                dp[i][j] = if a[i] == b[j] {
                    dp[i + 1][j + 1] + 1
                } else {
                    dp[i + 1][j].max(dp[i][j + 1])
                };
            }
        }
        dp[0][0]
    }

    #[test]
    fn myers_scripts_are_valid_and_minimal() {
        // A small LCG: deterministic random inputs without a dependency.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |bound: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % bound
        };
        let words = ["a", "b", "c", "d"];
        for _ in 0..500 {
            let a: Vec<&str> = (0..next(12)).map(|_| words[next(4) as usize]).collect();
            let b: Vec<&str> = (0..next(12)).map(|_| words[next(4) as usize]).collect();
            let script = edit_script(&a, &b);
            assert_eq!(replay(&a, &b, &script), b, "{a:?} -> {b:?}");
            let edits = script.iter().filter(|op| **op != Op::Equal).count();
            assert_eq!(
                edits,
                a.len() + b.len() - 2 * lcs_len(&a, &b),
                "{a:?} -> {b:?}"
            );
        }
    }

    #[test]
    fn past_the_cap_the_middle_is_replaced_wholesale() {
        let a = ["x", "1", "2", "3"];
        let b = ["y", "1", "2", "4"];
        assert_eq!(myers(&a, &b, 2), None);
        assert!(myers(&a, &b, 4).is_some());
    }

    #[test]
    fn a_large_rewrite_hits_the_cap_and_still_diffs_correctly() {
        let old: String = (0..5_000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..5_000).map(|i| format!("new {i}\n")).collect();
        let started = std::time::Instant::now();
        let d = unified_diff(&old, &new, "a/f", "b/f");
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        assert_eq!(d.lines().filter(|l| l.starts_with("-old")).count(), 5_000);
        assert_eq!(d.lines().filter(|l| l.starts_with("+new")).count(), 5_000);
        assert!(d.contains("@@ -1,5000 +1,5000 @@\n"));
    }

    #[test]
    fn unified_output() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
        let new = "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n";
        assert_eq!(
            unified_diff(old, new, "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n 1\n-2\n+TWO\n 3\n 4\n 5\n\
             @@ -10,3 +10,4 @@\n 10\n 11\n 12\n+13\n"
        );
        assert_eq!(unified_diff(old, old, "a/f", "b/f"), "");
        assert_eq!(
            unified_diff("", "x\ny\n", "/dev/null", "b/f"),
            "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+x\n+y\n"
        );
        assert_eq!(
            unified_diff("a\nb", "a\nb\n", "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"
        );
        // Changes 6 equal lines apart share a hunk.
        let near = "1\nX\n3\n4\n5\n6\n7\n8\nY\n10\n11\n12\n";
        let d = unified_diff(old, near, "a/f", "b/f");
        assert_eq!(d.matches("@@ -").count(), 1, "{d}");
    }
}
