//! Who sandboxes run as when the supervisor is root: by default one fresh uid per live
//! sandbox (from [`crate::EngineConfig::uid_base`]), so `RLIMIT_NPROC` and signals are
//! per sandbox; or, as RAppArmor's per-call uid and gid, one the administrator names
//! (`--uid`, `--gid`). A named uid is checked: never 0, never a login account's unless
//! the administrator says so, because the sandbox would then share that account's
//! processes, files and limits.

use crate::errors::{EngineError, InputError};
use lockdown::Identity;
use std::path::Path;

/// A uid/gid every sandbox runs as, as asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunAs {
    /// The uid.
    pub uid: u32,
    /// The gid (default: the uid).
    pub gid: u32,
    /// Accept a uid that belongs to a login account.
    pub allow_login_account: bool,
}

impl RunAs {
    /// The identity, checked: the supervisor is root, neither id is 0, and the uid is
    /// not a login account's (unless allowed).
    pub fn checked(&self) -> Result<Identity, EngineError> {
        let bad =
            |message: String| EngineError::from(InputError::BadLimit { what: "--uid/--gid".into(), value: message });
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(bad(
                "a fixed uid needs a supervisor running as root (an ordinary user's sandboxes run as that user)".into(),
            ));
        }
        if self.uid == 0 || self.gid == 0 {
            return Err(bad("0 is root; pick an unprivileged uid and gid".into()));
        }
        if !self.allow_login_account {
            let passwd =
                std::fs::read_to_string(Path::new("/etc/passwd")).map_err(EngineError::io("read /etc/passwd"))?;
            if let Some(name) = login_account(&passwd, self.uid) {
                return Err(bad(format!(
                    "uid {} is the login account {name}: its processes, files and limits would be the sandbox's; \
                     pick an unused uid, or add --allow-login-uid",
                    self.uid
                )));
            }
        }
        Ok(Identity { uid: self.uid, gid: self.gid })
    }
}

/// The name of the account in `passwd` (the text of `/etc/passwd`) with `uid` and a
/// shell one can log in with, if any.
pub fn login_account(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let (name, id, shell) = (fields.first()?, fields.get(2)?, fields.get(6).copied().unwrap_or(""));
        let no_login =
            shell.is_empty() || ["nologin", "false", "sync", "shutdown", "halt"].iter().any(|s| shell.ends_with(s));
        (id.parse::<u32>().ok() == Some(uid) && !no_login).then(|| name.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_accounts_are_those_with_a_shell() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                      alice:x:1000:1000:Alice:/home/alice:/bin/zsh\n\
                      svc:x:1001:1001::/srv:/bin/false\n\
                      # comment:x:1002\n";
        assert_eq!(login_account(passwd, 1000).as_deref(), Some("alice"));
        assert_eq!(login_account(passwd, 0).as_deref(), Some("root"));
        assert_eq!(login_account(passwd, 1), None);
        assert_eq!(login_account(passwd, 1001), None);
        assert_eq!(login_account(passwd, 1002), None);
        assert_eq!(login_account(passwd, 4242), None);
    }
}
