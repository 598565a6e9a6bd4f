//! `rsandbox-server`: the same command line as `rsandbox`, with the long-running fronts
//! (`serve`, `mcp`, the daemon's server) in this process. `rsandbox` hands those
//! commands to this binary, found beside it.

fn main() -> std::process::ExitCode {
    rsandbox_cli::rsandbox_server_main()
}
