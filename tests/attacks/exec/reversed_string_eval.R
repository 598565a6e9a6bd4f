# category: exec
# summary: code reversed, un-reversed and evaluated through str2lang
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED

eval(str2lang(intToUtf8(rev(utf8ToInt(")\"DEDEECCUS-KCATTA ohce\"(metsys")))))
