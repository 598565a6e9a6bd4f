library(testthat)
library(rsandbox)
test_check("rsandbox")
