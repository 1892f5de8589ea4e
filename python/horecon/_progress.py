"""Progress bars, progress callbacks and Ctrl-C for long library calls (issue 11).

The library calls one progress function per plan (``horecon_set_progress``)
and one per thread for the simulation toolkit (``horecon_sim_set_progress``)
with the fraction done, on the thread that made the call; returning non-zero
cancels the call (``HORECON_ERR_CANCELLED``). This module installs a single
trampoline for both, which hands the fraction to the handler of the call
running on that thread:

- ``progress=None`` (default): a tqdm bar when tqdm is installed, shown only
  for calls that last more than a second; ``False``: none; ``True``: a tqdm
  bar from the start; a callable ``f(fraction) -> truthy to stop``.
- On the main thread the call runs on a worker thread so that Ctrl-C
  (KeyboardInterrupt) is seen at once: it cancels the call
  (``horecon_cancel`` for plans, the trampoline for the toolkit), waits for it
  to return, and is re-raised (chained to the CANCELLED error).
"""

from __future__ import annotations

import threading
from ctypes import CFUNCTYPE, c_double, c_int32, c_void_p

FractionFn = CFUNCTYPE(c_int32, c_void_p, c_double)

_TLS = threading.local()


class _Handler:
    def __init__(self, progress, label: str):
        if not (progress is None or isinstance(progress, bool) or callable(progress)):
            raise TypeError(
                f"{label}: progress must be None (a tqdm bar when tqdm is installed), True, False "
                f"or callable(fraction) -> truthy to stop, got {type(progress).__name__}"
            )
        self.progress = progress
        self.label = label
        self.stop = threading.Event()
        self.bar = None
        self.raised = []
        self.tqdm = None
        if progress is None or progress is True:
            try:
                from tqdm.auto import tqdm

                self.tqdm = tqdm
            except ImportError:
                self.tqdm = None

    def __call__(self, fraction: float) -> int:
        if self.stop.is_set():
            return 1
        if callable(self.progress) and not isinstance(self.progress, bool):
            try:
                return 1 if self.progress(float(fraction)) else 0
            except BaseException as e:  # noqa: BLE001 - re-raised after the call
                self.raised.append(e)
                return 1
        if self.tqdm is not None:
            if self.bar is None:
                delay = 0.0 if self.progress is True else 1.0
                self.bar = self.tqdm(total=100, desc=f"horecon {self.label}", unit="%", delay=delay, leave=False)
            self.bar.update(max(0, int(100 * fraction) - self.bar.n))
        return 0

    def close(self):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _trampoline(_user, fraction):
    handler = getattr(_TLS, "handler", None)
    return 0 if handler is None else handler(fraction)


TRAMPOLINE = FractionFn(_trampoline)  # lives as long as the module


def run(label: str, call, cancel=None, progress=None, sim_lib=None):
    """Runs ``call()`` (a library call returning ``(status, message)``, the
    message read on the calling thread) with ``progress`` handled as in the
    module docs. ``cancel()`` stops it from another thread (plans); for the
    toolkit ``sim_lib`` is the library whose thread callback is set around the call.
    Returns ``(status, message)``; raises KeyboardInterrupt after a Ctrl-C and the
    callback's own exception if it raised one."""
    handler = _Handler(progress, label)
    outcome = {}
    finished = threading.Event()

    def work():
        _TLS.handler = handler
        if sim_lib is not None:
            sim_lib.horecon_sim_set_progress(TRAMPOLINE, None)
        try:
            outcome["result"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome["exception"] = e
        finally:
            if sim_lib is not None:
                sim_lib.horecon_sim_set_progress(FractionFn(), None)
            _TLS.handler = None
            finished.set()

    interrupt = None
    try:
        if threading.current_thread() is not threading.main_thread():
            work()
        else:
            worker = threading.Thread(target=work, name=f"horecon-{label}", daemon=True)
            worker.start()
            # an Event, not Thread.join: an interrupted join can mark a live thread stopped
            while not finished.is_set():
                try:
                    finished.wait(0.05)
                except KeyboardInterrupt as e:
                    interrupt = e
                    handler.stop.set()
                    if cancel is not None:
                        cancel()
    finally:
        handler.close()
    if "exception" in outcome:
        raise outcome["exception"]
    status, message = outcome["result"]
    return status, message, interrupt, handler.raised


def null_callback():
    """A NULL horecon_fraction_fn (removes a callback)."""
    return FractionFn()


__all__ = ["run", "TRAMPOLINE", "FractionFn", "null_callback"]
