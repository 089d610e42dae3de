use super::*;

fn settings(
    approval_policy: Option<AskForApproval>,
    sandbox: Option<SandboxMode>,
    cwd: Option<&str>,
) -> ThreadSettings {
    ThreadSettings {
        approval_policy,
        sandbox: sandbox.map(SandboxPolicy::from_mode),
        cwd: cwd.map(str::to_owned),
        ..ThreadSettings::default()
    }
}

#[test]
fn approval_policies_are_ordered_by_permissiveness() {
    let ceilings = Ceilings::none().with_max_approval_policy(AskForApproval::OnRequest, "--max");
    for allowed in [
        AskForApproval::Untrusted,
        AskForApproval::OnFailure,
        AskForApproval::OnRequest,
    ] {
        ceilings
            .check_approval_policy(allowed, "approvalPolicy")
            .unwrap();
    }
    let error = ceilings
        .check_approval_policy(AskForApproval::Never, "approvalPolicy")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "approvalPolicy \"never\" is above this server's ceiling \"on-request\" (set by --max)"
    );
    let strict = Ceilings::none().with_max_approval_policy(AskForApproval::Untrusted, "f");
    for refused in [
        AskForApproval::OnFailure,
        AskForApproval::OnRequest,
        AskForApproval::Never,
    ] {
        assert!(
            strict.check_approval_policy(refused, "p").is_err(),
            "{refused}"
        );
    }
}

#[test]
fn sandbox_modes_are_ordered_by_permissiveness() {
    let ceilings = Ceilings::none().with_max_sandbox(SandboxMode::WorkspaceWrite, "--max-sandbox");
    ceilings
        .check_sandbox_mode(SandboxMode::ReadOnly, "sandbox")
        .unwrap();
    ceilings
        .check_sandbox_mode(SandboxMode::WorkspaceWrite, "sandbox")
        .unwrap();
    let error = ceilings
        .check_sandbox_mode(SandboxMode::DangerFullAccess, "sandbox")
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "sandbox \"danger-full-access\" is above this server's ceiling \"workspace-write\" (set by --max-sandbox)"
    );
    let read_only = Ceilings::none().with_max_sandbox(SandboxMode::ReadOnly, "f");
    assert!(
        read_only
            .check_sandbox_mode(SandboxMode::WorkspaceWrite, "sandbox")
            .is_err()
    );
}

#[test]
fn a_sandbox_policy_counts_as_the_mode_whose_limits_it_has() {
    let ceilings = Ceilings::none().with_max_sandbox(SandboxMode::WorkspaceWrite, "--max-sandbox");
    let workspace = |network_access| SandboxPolicy::WorkspaceWrite {
        writable_roots: Vec::new(),
        network_access,
        exclude_tmpdir_env_var: false,
        exclude_slash_tmp: false,
    };
    ceilings
        .check_sandbox_policy(&workspace(false), None)
        .unwrap();
    ceilings
        .check_sandbox_policy(
            &SandboxPolicy::ReadOnly {
                network_access: false,
            },
            None,
        )
        .unwrap();
    let refused = [
        workspace(true),
        SandboxPolicy::ReadOnly {
            network_access: true,
        },
        SandboxPolicy::DangerFullAccess,
        SandboxPolicy::ExternalSandbox {
            network_access: spool_protocol::NetworkAccess::Restricted,
        },
    ];
    for policy in refused {
        let error = ceilings.check_sandbox_policy(&policy, None).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("counts as \"danger-full-access\", which is above"),
            "{error}"
        );
    }
    let error = ceilings
        .check_sandbox_policy(&workspace(true), None)
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "sandboxPolicy workspaceWrite with networkAccess counts as \"danger-full-access\", \
         which is above this server's ceiling \"workspace-write\" (set by --max-sandbox)"
    );
    // Without a sandbox ceiling anything goes.
    Ceilings::none()
        .check_sandbox_policy(&SandboxPolicy::DangerFullAccess, None)
        .unwrap();
}

#[test]
fn allowed_values_list_everything_at_or_below_the_ceiling() {
    assert_eq!(Ceilings::none().allowed_approval_policies(true), None);
    assert_eq!(Ceilings::none().allowed_sandbox_modes(), None);
    let ceilings = Ceilings::none()
        .with_max_approval_policy(AskForApproval::OnRequest, "a")
        .with_max_sandbox(SandboxMode::WorkspaceWrite, "b");
    assert_eq!(
        ceilings.allowed_approval_policies(true),
        Some(vec![
            AskForApproval::Untrusted,
            AskForApproval::OnFailure,
            AskForApproval::OnRequest
        ])
    );
    assert_eq!(
        ceilings.allowed_approval_policies(false),
        Some(vec![AskForApproval::Untrusted, AskForApproval::OnRequest])
    );
    assert_eq!(
        ceilings.allowed_sandbox_modes(),
        Some(vec![SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite])
    );
}

/// `<tmp>/work` (the root) holding `inside/`, a file, and `escape` (a
/// symlink to `<tmp>/outside`).
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("work");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("inside")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("file.txt"), "x").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
    Tree {
        _dir: dir,
        root,
        outside,
    }
}

fn s(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn a_cwd_must_resolve_within_a_root() {
    let t = tree();
    let ceilings = Ceilings::none()
        .with_allowed_roots([t.root.clone()], "--allowed-root")
        .unwrap();
    assert_eq!(ceilings.check_cwd(&s(&t.root), "cwd").unwrap(), s(&t.root));
    let inside = t.root.join("inside");
    assert_eq!(ceilings.check_cwd(&s(&inside), "cwd").unwrap(), s(&inside));
    // `..` that stays inside resolves to the plain path.
    let detour = t.root.join("inside/../inside");
    assert_eq!(ceilings.check_cwd(&s(&detour), "cwd").unwrap(), s(&inside));

    // `..` out of the root.
    let up = t.root.join("inside/../../outside");
    let error = ceilings.check_cwd(&s(&up), "cwd").unwrap_err();
    assert!(
        matches!(&error, CeilingError::OutsideRoots { resolved, .. } if *resolved == t.outside),
        "{error:?}"
    );
    // A symlink inside the root pointing out of it.
    let escape = t.root.join("escape");
    let error = ceilings.check_cwd(&s(&escape), "cwd").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "cwd {:?} (resolved: {:?}) is outside this server's allowed roots ({}) (set by --allowed-root)",
            s(&escape),
            s(&t.outside),
            s(&t.root)
        )
    );
    assert!(matches!(
        ceilings.check_cwd("/", "cwd"),
        Err(CeilingError::OutsideRoots { .. })
    ));
    // A sibling whose name starts like the root is not inside it.
    let sibling = t.root.with_file_name("work2");
    std::fs::create_dir(&sibling).unwrap();
    assert!(matches!(
        ceilings.check_cwd(&s(&sibling), "cwd"),
        Err(CeilingError::OutsideRoots { .. })
    ));
}

#[test]
fn a_cwd_that_does_not_exist_or_is_a_file_is_refused() {
    let t = tree();
    let ceilings = Ceilings::none()
        .with_allowed_roots([t.root.clone()], "--allowed-root")
        .unwrap();
    let missing = t.root.join("nope");
    let error = ceilings.check_cwd(&s(&missing), "cwd").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("cwd {:?} does not exist", s(&missing))
    );
    let file = t.root.join("file.txt");
    assert!(matches!(
        ceilings.check_cwd(&s(&file), "cwd"),
        Err(CeilingError::NotADirectory { .. })
    ));
    // Without roots too: a working directory must be one.
    assert!(matches!(
        Ceilings::none().check_cwd(&s(&missing), "cwd"),
        Err(CeilingError::Missing { .. })
    ));
    assert!(matches!(
        Ceilings::none().check_cwd(&s(&file), "cwd"),
        Err(CeilingError::NotADirectory { .. })
    ));
    // ... and is used as given (no ceiling to check it against).
    assert_eq!(
        Ceilings::none().check_cwd(&s(&t.outside), "cwd").unwrap(),
        s(&t.outside)
    );
}

#[test]
fn writable_roots_must_lie_within_a_root_too() {
    let t = tree();
    let ceilings = Ceilings::none()
        .with_allowed_roots([t.root.clone()], "--allowed-root")
        .unwrap();
    let policy = |roots: &[&str]| SandboxPolicy::WorkspaceWrite {
        writable_roots: roots.iter().map(|r| r.to_string()).collect(),
        network_access: false,
        exclude_tmpdir_env_var: false,
        exclude_slash_tmp: false,
    };
    let root = s(&t.root);
    ceilings
        .check_sandbox_policy(&policy(&[&s(&t.root.join("inside"))]), Some(&root))
        .unwrap();
    // Relative to the thread's working directory.
    ceilings
        .check_sandbox_policy(&policy(&["inside"]), Some(&root))
        .unwrap();
    for refused in [s(&t.outside), "escape".to_owned(), "/".to_owned()] {
        let error = ceilings
            .check_sandbox_policy(&policy(&[&refused]), Some(&root))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("sandboxPolicy.writableRoots "),
            "{error}"
        );
    }
}

#[test]
fn a_root_that_cannot_be_resolved_is_an_error() {
    let t = tree();
    let error = Ceilings::none()
        .with_allowed_roots([t.root.join("nope")], "allowed_roots in /x/spool.toml")
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("(set by allowed_roots in /x/spool.toml) cannot be used"),
        "{message}"
    );
    assert!(
        Ceilings::none()
            .with_allowed_roots([t.root.join("file.txt")], "f")
            .is_err()
    );
}

#[test]
fn thread_settings_are_checked_and_run_in_the_resolved_cwd() {
    let t = tree();
    let ceilings = Ceilings::none()
        .with_max_approval_policy(AskForApproval::OnRequest, "--max-approval-policy")
        .with_max_sandbox(SandboxMode::WorkspaceWrite, "--max-sandbox")
        .with_allowed_roots([t.root.clone()], "--allowed-root")
        .unwrap();
    let detour = s(&t.root.join("inside/.."));
    let admitted = ceilings
        .check_thread_settings(
            settings(
                Some(AskForApproval::OnRequest),
                Some(SandboxMode::ReadOnly),
                Some(&detour),
            ),
            &Fields::CLIENT,
        )
        .unwrap();
    assert_eq!(admitted.cwd, Some(s(&t.root)));
    let error = ceilings
        .check_thread_settings(
            settings(Some(AskForApproval::Never), None, None),
            &Fields::SERVER_DEFAULTS,
        )
        .unwrap_err();
    assert!(
        error.to_string().starts_with("--approval-policy \"never\""),
        "{error}"
    );
    let error = ceilings
        .check_thread_settings(
            settings(None, Some(SandboxMode::DangerFullAccess), None),
            &Fields::CLIENT,
        )
        .unwrap_err();
    assert!(matches!(error, CeilingError::SandboxMode { .. }));
    // Unset fields are not checked (the server's defaults fill them).
    ceilings
        .check_thread_settings(ThreadSettings::default(), &Fields::CLIENT)
        .unwrap();
}

#[test]
fn under_a_sandbox_ceiling_without_roots_extra_writable_roots_stay_in_the_workspace() {
    let t = tree();
    let ceilings = Ceilings::none().with_max_sandbox(SandboxMode::WorkspaceWrite, "--max-sandbox");
    let policy = |roots: &[&str]| SandboxPolicy::WorkspaceWrite {
        writable_roots: roots.iter().map(|r| r.to_string()).collect(),
        network_access: false,
        exclude_tmpdir_env_var: false,
        exclude_slash_tmp: false,
    };
    let root = s(&t.root);
    ceilings
        .check_sandbox_policy(&policy(&["inside"]), Some(&root))
        .unwrap();
    for refused in [s(&t.outside), "escape".to_owned(), "/".to_owned()] {
        let error = ceilings
            .check_sandbox_policy(&policy(&[&refused]), Some(&root))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("is outside the working directory")
                && error.to_string().contains("(set by --max-sandbox)"),
            "{error}"
        );
    }
    // With no ceiling at all, a client may name any folder.
    Ceilings::none()
        .check_sandbox_policy(&policy(&[&s(&t.outside)]), Some(&root))
        .unwrap();
}
