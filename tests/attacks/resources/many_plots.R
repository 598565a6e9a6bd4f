# category: resources
# summary: 300 plots (base64 PNGs in the result) under --max-output 1M
# args: --max-output 1M --timeout 20
# expect: outcome=output_limit
# targets: host:resources
# calibrate: no — unsandboxed the plots go to Rplots.pdf; the limit is the point

for (i in 1:300) plot(i)
