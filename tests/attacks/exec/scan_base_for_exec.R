# category: exec
# summary: find any base function whose body calls .Internal(system(...)) and use it
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

for (n in ls(baseenv(), all.names = TRUE)) {
  f <- get(n, baseenv())
  if (is.function(f) && !is.primitive(f) && any(grepl("Internal(system(", deparse(f), fixed = TRUE))) {
    f("echo ATTACK-SUCCEEDED")
    break
  }
}
