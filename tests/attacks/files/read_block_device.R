# category: files
# summary: read the host's disk through its block device
# expect: outcome=error
# expect-error-contains: cannot open
# targets: none
# calibrate: no — the test machine's device cgroup refuses block devices even to root, so unsandboxed it fails too

devs <- c("/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/xvda")
# Inside the private root no device node but the policy's exists: then try the first.
d <- c(devs[file.exists(devs)], devs)[1]
x <- readBin(d, "raw", 512)
cat("read", length(x), "bytes of", d, "\n")
