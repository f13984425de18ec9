#!/usr/bin/env python3
"""Checks that files and functions stay small enough to read.

Fails (exit 1) when a source file (.cc .h .cu .cuh .py) in the project's folders (not
third_party/, bazel-*/ or hidden folders) is over MAX_FILE_LINES lines, or when a function
body in one of FUNCTION_FOLDERS is over MAX_FUNCTION_LINES lines, and names each offender.

Functions are found by a brace-matching scan of C++ with comments, strings and preprocessor
lines blanked out: a `{` opens a namespace (scanned inside), a class/struct/union (scanned
inside, so member functions defined in the class count), an enum or initializer (skipped), or,
when the text before it ends a parameter list, a function body, which is measured from the
line its declaration starts on to its closing brace. Lambdas and local classes count toward the
function that holds them: the point is the length a reader has to hold at once.

Usage: check_sizes.py [ROOT]   (ROOT defaults to the repository root above this file)
"""
import os
import re
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120
FUNCTION_FOLDERS = ["runtime"]
SOURCE = re.compile(r"\.(cc|h|cu|cuh|py)$")
CPP = re.compile(r"\.(cc|h|cu|cuh)$")
SKIPPED_DIRS = {"third_party"}


def blank_comments_and_strings(text):
    """Replaces comments, string and character literals and preprocessor lines with spaces,
    keeping every newline, so braces in them are not counted and line numbers stay right."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A preprocessor line, with its continuations.
            j = i
            while j < n and not (text[j] == "\n" and text[j - 1] != "\\"):
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m is None:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            # A digit separator (1'000'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else " " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def function_name(header):
    """The (qualified) name before the parameter list of a function header, or None."""
    header = re.sub(r"\s+", " ", header).strip()
    # Attributes with their own parentheses come before the name (CUDA's launch bounds).
    header = re.sub(r"\b(__launch_bounds__|__attribute__|alignas)\s*\((?:[^()]|\([^()]*\))*\)",
                    " ", header)
    first_paren = header.find("(")
    if first_paren < 0:
        return None
    m = re.search(r"((?:[A-Za-z_~]\w*\s*(?:<[^()]*>)?\s*::\s*)*"
                  r"(?:operator\s*\S+?|[~A-Za-z_]\w*))\s*$", header[:first_paren])
    return re.sub(r"\s+", "", m.group(1)) if m else None


CLASS_KEY = re.compile(r"\b(class|struct|union)\b")
CLASS_NAME = re.compile(r"\b(?:class|struct|union)\s+(?:\w+\s+)*?([A-Za-z_]\w*)\s*(?:final\s*)?"
                        r"(?::[^{]*)?$")
# The end of a function's declarator: ") const", ") noexcept", ") override", ") -> T".
DECLARATOR_END = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?(override\s*)?(->.*)?$")


def is_class_head(flat):
    """A class, struct or union definition (not a function returning one, "struct S f() {")."""
    key = CLASS_KEY.search(flat)
    if key is None or DECLARATOR_END.search(flat):
        return False
    return "(" not in flat or flat.index("(") > key.start()


def functions(code):
    """Yields (qualified name, first line, last line) of every function body in `code`."""
    line_of = []
    line = 1
    for ch in code:
        line_of.append(line)
        if ch == "\n":
            line += 1

    def scan(start, end, scope):
        i = start
        header_start = start
        while i < end:
            ch = code[i]
            if ch in ";}":
                header_start = i + 1
            if ch != "{":
                i += 1
                continue
            close = matching_brace(code, i)
            flat = re.sub(r"\s+", " ", code[header_start:i]).strip()
            # Access labels end a header too ("public: Foo() {").
            flat = re.sub(r"^(?:(?:public|private|protected)\s*:(?!:)\s*)+", "", flat)
            if re.match(r"^(inline\s+)?namespace\b", flat) or flat.startswith('extern "C"'):
                yield from scan(i + 1, close, scope)
            elif re.search(r"\benum\b", flat) and "(" not in flat:
                pass
            elif is_class_head(flat):
                m = CLASS_NAME.search(flat)
                yield from scan(i + 1, close, scope + [m.group(1) if m else "<anonymous>"])
            elif ")" in flat and not re.search(r"=\s*$", flat) and not flat.endswith(","):
                name = function_name(flat)
                if name is not None:
                    # The declaration starts at its first non-blank character.
                    first = header_start
                    while first < i and code[first].isspace():
                        first += 1
                    qualified = name if "::" in name else "::".join(scope + [name])
                    yield qualified, line_of[first], line_of[close]
            # Anything else (an initializer, a lambda at namespace scope) is skipped whole.
            i = close + 1
            header_start = i

    yield from scan(0, len(code), [])


def main(root):
    problems = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs
                         if not d.startswith((".", "bazel-")) and d not in SKIPPED_DIRS)
        rel_folder = os.path.relpath(folder, root)
        for n in sorted(names):
            if not SOURCE.search(n):
                continue
            rel = os.path.normpath(os.path.join(rel_folder, n))
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
            lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
            if lines > MAX_FILE_LINES:
                problems.append(f"{rel}: {lines} lines (limit {MAX_FILE_LINES})")
            top = rel.split(os.sep)[0]
            if top not in FUNCTION_FOLDERS or not CPP.search(n):
                continue
            for name, first, last in functions(blank_comments_and_strings(text)):
                length = last - first + 1
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{rel}:{first}: {name} is {length} lines "
                                    f"(limit {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    print(f"{len(problems)} size violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(here))))
