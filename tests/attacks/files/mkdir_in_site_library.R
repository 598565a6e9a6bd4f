# category: files
# summary: create a package directory in the system site library
# expect: outcome=error
# expect-error-contains: blocked
# targets: file:site-library
# calibrate: yes
# calibrate-expect-changed: file:site-library

if (!dir.create("{{NEW_SITE_LIBRARY}}")) stop("blocked: cannot create the package directory")
