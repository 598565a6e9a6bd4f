# category: exec
# summary: a command smuggled into a model formula, run by model.frame inside lm()
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

d <- data.frame(y = c(1, 3, 2, 5), x = 1:4)
fit <- lm(y ~ x + I(x * system("echo ATTACK-SUCCEEDED")), data = d)
print(coef(fit))
