//! `rsandbox`: the command line (see the library's documentation for the commands and
//! which of them `rsandbox-server` runs).

fn main() -> std::process::ExitCode {
    rsandbox_cli::rsandbox_main()
}
