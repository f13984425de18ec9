"""Protobuf text format as Caffe writes it (prototxt), read into plain Python values.

Nested ``name { }`` blocks, ``key: value``, repeated keys, quoted strings, bare-word enums and
``#`` comments. Every message becomes a ``Message``: a dict from field name to the *list* of its
values, so repeated and single fields look the same; ``one()`` gives the last value (protobuf's
rule for a non-repeated field given twice) and ``many()`` gives all of them. Part of the
benchmark's PyTorch side (caffe_torch.py); numpy only, no protobuf package.
"""

import re

# ------------------------------------------------------------------------------------------------
# (a) Protobuf text format
# ------------------------------------------------------------------------------------------------

class Message(dict):
    """A parsed text-format message: field name -> list of values (scalars or Messages).

    Values are kept as lists because the text format does not say which fields are repeated;
    the reader of a field knows, and picks ``one()`` or ``many()`` accordingly.
    """

    def add(self, key, value):
        self.setdefault(key, []).append(value)

    def one(self, key, default=None):
        """The field's value; protobuf keeps the last one when a singular field is repeated."""
        values = dict.get(self, key)
        return values[-1] if values else default

    def many(self, key):
        return list(dict.get(self, key, ()))

    def has(self, key):
        return bool(dict.get(self, key))

    def msg(self, key):
        """A sub-message, or an empty one so that defaults apply when the block is absent."""
        value = self.one(key)
        return value if isinstance(value, Message) else Message()


# Strings may use either quote; everything that is not punctuation, space or a quote is one word
# (identifiers, enum names, numbers such as -1.5e-3, inf, 0x1F).
_TOKEN_RE = re.compile(r"""
      (?P<space>\s+|\#[^\n]*)
    | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | (?P<punct>[{}\[\]:;,<>])
    | (?P<word>[^\s{}\[\]:;,<>"'\#]+)
""", re.VERBOSE)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def _unescape(body):
    """C-style escapes as protobuf's text format allows them (\\n, \\", octal, \\x hex)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 == len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _ESCAPES:
            out.append(_ESCAPES[n])
            i += 2
        elif n in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1:]).group(0)
            out.append(chr(int(digits, 8)))
            i += 1 + len(digits)
        elif n in "xX":
            digits = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            if not digits:
                raise ValueError("bad \\x escape in string %r" % body)
            out.append(chr(int(digits.group(0), 16)))
            i += 2 + len(digits.group(0))
        else:
            raise ValueError("unknown escape \\%s in string %r" % (n, body))
    return "".join(out)


def _scalar(word):
    """A bare word: number, bool, or enum name (kept as a string)."""
    if word in ("true", "True", "t"):
        return True
    if word in ("false", "False", "f"):
        return False
    try:
        return int(word, 0) if not re.fullmatch(r"-?0[0-7]+", word) else int(word, 8)
    except ValueError:
        pass
    text = word[:-1] if word[-1:] in "fF" and re.search(r"[0-9.]", word) else word
    lowered = text.lower()
    if lowered in ("inf", "infinity", "-inf", "-infinity", "nan", "-nan"):
        return float(lowered.replace("infinity", "inf"))
    try:
        return float(text)
    except ValueError:
        return word  # an enum value such as MAX or ACROSS_CHANNELS


class _Tokens:
    """The token stream, with line numbers for error messages."""

    def __init__(self, text):
        self.items = []  # (kind, text, line)
        line, pos = 1, 0
        while pos < len(text):
            m = _TOKEN_RE.match(text, pos)
            if not m:
                raise ValueError("prototxt line %d: unexpected character %r" % (line, text[pos]))
            kind = m.lastgroup
            if kind != "space":
                self.items.append((kind, m.group(kind), line))
            line += m.group(0).count("\n")
            pos = m.end()
        self.i = 0

    def peek(self):
        return self.items[self.i] if self.i < len(self.items) else (None, None, -1)

    def take(self):
        item = self.peek()
        if item[0] is None:
            raise ValueError("prototxt: unexpected end of text")
        self.i += 1
        return item

    def accept(self, text):
        kind, value, _ = self.peek()
        if kind == "punct" and value == text:
            self.i += 1
            return True
        return False

    def error(self, what):
        kind, value, line = self.peek()
        return ValueError("prototxt line %d: %s (found %r)" % (line, what, value))


def _parse_value(tokens):
    kind, value, line = tokens.take()
    if kind == "string":
        # Adjacent string literals concatenate, as in C.
        parts = [_unescape(value[1:-1])]
        while tokens.peek()[0] == "string":
            parts.append(_unescape(tokens.take()[1][1:-1]))
        return "".join(parts)
    if kind == "word":
        return _scalar(value)
    raise ValueError("prototxt line %d: expected a value, found %r" % (line, value))


def _parse_fields(tokens, closing):
    msg = Message()
    while True:
        if closing is None and tokens.peek()[0] is None:
            return msg
        if closing is not None and tokens.accept(closing):
            return msg
        kind, name, line = tokens.take()
        if kind != "word":
            raise ValueError("prototxt line %d: expected a field name, found %r" % (line, name))
        colon = tokens.accept(":")
        if tokens.accept("{"):
            msg.add(name, _parse_fields(tokens, "}"))
        elif tokens.accept("<"):
            msg.add(name, _parse_fields(tokens, ">"))
        elif not colon:
            raise tokens.error("expected ':' or '{' after %r" % name)
        elif tokens.accept("["):
            # List syntax: key: [v1, v2] (values or messages).
            if not tokens.accept("]"):
                while True:
                    if tokens.accept("{"):
                        msg.add(name, _parse_fields(tokens, "}"))
                    else:
                        msg.add(name, _parse_value(tokens))
                    if tokens.accept("]"):
                        break
                    if not tokens.accept(","):
                        raise tokens.error("expected ',' or ']' in list")
        else:
            msg.add(name, _parse_value(tokens))
        # Fields may be separated by an optional ',' or ';'.
        if not tokens.accept(";"):
            tokens.accept(",")


def parse_prototxt(text):
    """Protobuf text format -> Message (nested dicts of lists)."""
    return _parse_fields(_Tokens(text), None)


def load_prototxt(path):
    with open(path, "r", encoding="utf-8") as f:
        return parse_prototxt(f.read())
