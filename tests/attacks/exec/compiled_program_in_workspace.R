# category: exec
# summary: compile a program into the workspace and run it (under compile the compiler may run; its output may not)
# expect: outcome=violation
# expect-violation: execve
# targets: none
# calibrate: yes
# calibrate-expect-stdout-contains: ATTACK-SUCCEEDED
# compile-expect: outcome=ok — gcc is listed and builds it; the workspace has no execute right, so the shell says Permission denied and system() returns 126

writeLines(c("#include <stdio.h>", "int main(void) { puts(\"ATTACK-SUCCEEDED\"); return 0; }"), "hello.c")
built <- system("gcc -o hello hello.c")
ran <- system("./hello")
cat("built", built, "ran", ran, "\n")
