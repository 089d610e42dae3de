//! MCP in a spool built without it (no `mcp` cargo feature): servers in
//! `[mcp_servers]` are named in a warning and not used.

use std::collections::BTreeMap;
use std::sync::Arc;

use spool_mcp::McpServerConfig;

use crate::config::ConfigFile;

const NOT_BUILT: &str = "this spool was built without MCP (the `mcp` cargo feature)";

fn warn_unused(configs: &BTreeMap<String, McpServerConfig>) {
    if !configs.is_empty() {
        let names: Vec<&str> = configs.keys().map(String::as_str).collect();
        eprintln!(
            "spool: warning: {NOT_BUILT}; not starting {}",
            names.join(", ")
        );
    }
}

pub struct ServeMcp {
    pub toolbox: Option<super::run::McpToolboxRef>,
    pub admin: Option<Arc<dyn spool_server::McpAdmin>>,
}

pub fn serve_setup(configs: &BTreeMap<String, McpServerConfig>) -> anyhow::Result<ServeMcp> {
    warn_unused(configs);
    Ok(ServeMcp {
        toolbox: None,
        admin: None,
    })
}

impl ServeMcp {
    pub fn announce(&self, _hub: &Arc<spool_server::Hub>) {}
}

pub fn toolbox(configs: &BTreeMap<String, McpServerConfig>) -> Option<super::run::McpToolboxRef> {
    warn_unused(configs);
    None
}

pub async fn list(_config: &ConfigFile, _json_lines: bool) -> anyhow::Result<i32> {
    anyhow::bail!("{NOT_BUILT}")
}
