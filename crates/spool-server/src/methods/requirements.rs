//! `configRequirements/read`: the operator's ceilings, as Codex's
//! `ConfigRequirementsReadResponse` states them (see `crate::ceilings`).

use std::sync::Arc;

use spool_protocol::{ConfigRequirements, ConfigRequirementsReadResponse};

use super::{MethodError, Reply, reply};
use crate::connection::ConnectionState;
use crate::hub::Hub;

/// `{"requirements": null}` without ceilings; else every value a client
/// may ask for. `on-failure` and the allowed roots go only to clients that
/// opted in to spool's additions: Codex's `AskForApproval` has no
/// `on-failure` (a Codex client would fail to read the list), and Codex
/// has no field for roots.
pub(super) fn read(hub: &Arc<Hub>, state: &ConnectionState) -> Result<Reply, MethodError> {
    let ceilings = hub.ceilings();
    let spool = state.spool_additions;
    let requirements = ceilings.is_set().then(|| ConfigRequirements {
        allowed_approval_policies: ceilings.allowed_approval_policies(spool),
        allowed_sandbox_modes: ceilings.allowed_sandbox_modes(),
        allowed_roots: ceilings
            .allowed_roots()
            .filter(|_| spool)
            .map(|roots| roots.iter().map(|r| r.display().to_string()).collect()),
    });
    reply(ConfigRequirementsReadResponse { requirements })
}
