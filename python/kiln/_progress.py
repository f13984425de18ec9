"""The progress of a long call: tqdm's bar when tqdm is installed, else the CLI's live line
("iteration 120/500 (24%) loss 0.4512 · 85.3 it/s · ETA 4s") on stderr."""
import sys
import time


def _duration(seconds):
    seconds = int(seconds)
    if seconds >= 3600:
        return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60)
    if seconds >= 60:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%ds" % seconds


class Progress:
    """update(n, loss) after each chunk of work; close() at the end."""

    def __init__(self, total, initial=0, what="iteration", enabled=True):
        self.total, self.done, self.what = total, initial, what
        self._start, self._start_done = time.monotonic(), initial
        self._bar = None
        self._enabled = enabled
        self._last_print = 0.0
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            self._bar = tqdm(total=total, initial=initial, unit="it", desc=what,
                             dynamic_ncols=True)

    def update(self, n, loss=None):
        self.done += n
        if not self._enabled:
            return
        if self._bar is not None:
            if loss is not None:
                self._bar.set_postfix(loss="%.4g" % loss, refresh=False)
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self._last_print < 0.2 and self.done < self.total:
            return
        self._last_print = now
        elapsed = max(now - self._start, 1e-9)
        rate = (self.done - self._start_done) / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else 0
        line = "%s %d/%d (%d%%)" % (self.what, self.done, self.total,
                                    100 * self.done // max(self.total, 1))
        if loss is not None:
            line += " loss %.4g" % loss
        line += " \u00b7 %.1f it/s \u00b7 ETA %s" % (rate, _duration(eta))
        end = "\r" if sys.stderr.isatty() else "\n"
        sys.stderr.write("\x1b[2K" + line + end if end == "\r" else line + end)
        sys.stderr.flush()

    def write(self, message):
        """A line above the bar (a test result, a snapshot)."""
        if self._bar is not None:
            self._bar.write(message)
        else:
            if self._enabled and sys.stderr.isatty():
                sys.stderr.write("\x1b[2K")
            print(message, file=sys.stderr, flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.close()
        elif self._enabled and sys.stderr.isatty():
            sys.stderr.write("\n")
