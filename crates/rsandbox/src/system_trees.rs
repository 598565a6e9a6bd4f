//! The host's system trees: what every sandbox reads (R, its shared libraries, their
//! configuration) and what no profile may make writable. The policy reads them
//! ([`crate::r_policy`]), a profile's `write` is checked against them ([`crate::profile`]).

/// System trees R and its shared libraries are loaded from. No home directory, no
/// `/etc` beyond R's own configuration, fonts, the dynamic linker cache and the time zone.
pub const SYSTEM_READ_ONLY: [&str; 12] = [
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/etc/R",
    "/etc/fonts",
    // fontconfig's cache: without it the first plot in a child rescans every font.
    "/var/cache/fontconfig",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/timezone",
    "/usr/share/zoneinfo",
];
