# category: resources
# summary: 300 plots (base64 PNGs in the result) under --max-output 1M (drawing them takes 8 s on an idle machine: the timeout is wide so that load cannot turn the outcome into a timeout)
# args: --max-output 1M --timeout 60
# expect: outcome=output_limit
# targets: host:resources
# calibrate: no — unsandboxed the plots go to Rplots.pdf; the limit is the point

for (i in 1:300) plot(i)
