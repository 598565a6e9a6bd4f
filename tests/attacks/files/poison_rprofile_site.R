# category: files
# summary: append code to R's Rprofile.site, which every later R session runs
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:r-profile-site
# calibrate: no — it would modify the system's R installation

cat("\nsystem(\"id\")\n", file = "{{RPROFILE_SITE}}", append = TRUE)
