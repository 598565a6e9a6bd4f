# category: environment
# summary: look for Renviron files and the time zone the supervisor passed on
# expect: outcome=ok
# expect-stdout-contains: tz:
# targets: secret:env
# calibrate: no — this only reports what the sandbox exposes

# R reads Renviron files at start-up; which ones can we see, and did anything secret get in?
for (f in c(file.path(R.home("etc"), "Renviron.site"), "~/.Renviron", file.path(Sys.getenv("HOME"), ".Renviron")))
  cat(f, ":", file.exists(f), "\n")
cat("tz:", Sys.getenv("TZ"), "\n")
