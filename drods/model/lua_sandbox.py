"""A sandboxed Lua 5.4 (lupa) for the ``luaScript``s of Karmada's ResourceInterpreterCustomization.

A script is user code run inside the control plane, so each call gets a fresh interpreter with:

* no way out — ``os``, ``io``, ``debug``, ``package``, ``load``/``loadstring``/``dofile``/``loadfile``,
  ``coroutine`` (a coroutine would run outside the instruction hook), ``collectgarbage``,
  ``string.dump`` and ``print`` are gone, and ``setmetatable`` refuses ``__gc`` (finalizers run with
  the instruction hook off); ``require`` answers only ``"kube"`` (the helpers Karmada
  gives its scripts, `drods.model.lua_kube`); no Python object is reachable (lupa's ``python``
  table is removed and attribute access on the helper functions is refused);
* bounded instructions and time — a count hook stops the script after ``instructions`` VM
  instructions or ``seconds`` of wall time, whichever comes first;
* bounded memory — lupa's ``max_memory`` caps what the interpreter may allocate.

Objects cross as Lua tables (``obj.spec.replicas``); lists become 1-based sequences and come back as
lists. An empty table comes back as what was there before (``[]`` or ``{}``), else as ``{}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lupa import lua54

# Karmada scripts were written for Lua 5.1 (gopher-lua): ``unpack`` is kept as an alias.
_BOOTSTRAP = """
local sethook, fail, kube, clock, PATTERN_BUDGET = debug.sethook, error, ...
for _, name in ipairs({"os", "io", "debug", "package", "dofile", "loadfile", "load", "loadstring",
                       "collectgarbage", "coroutine", "print", "require", "python"}) do _G[name] = nil end
string.dump = nil
unpack = table.unpack
-- finalizers run with hooks off: a __gc metamethod could loop past every bound, so none is allowed
local setmeta, rawget_ = setmetatable, rawget
setmetatable = function(t, mt)
  if type(mt) == "table" and rawget_(mt, "__gc") ~= nil then fail("__gc metamethods are not allowed", 2) end
  return setmeta(t, mt)
end
require = function(name)
  if name == "kube" then return kube end
  fail("module '" .. tostring(name) .. "' not found (only \\"kube\\" is available)", 2)
end
-- Pattern matching runs in C, out of the instruction hook's reach: "a*a*a*a*b" over 200 characters ran
-- 15 s with the interpreter lock held. A call whose backtracking could pass PATTERN_BUDGET steps is
-- refused before it starts: the bound is the start positions tried times, for each repeated item, one
-- more than the characters of the subject that item matches (each %b or back-reference: the length).
local sfind, smatch, sgmatch, sgsub, ssub, sel, slen, type, tostring = string.find, string.match,
  string.gmatch, string.gsub, string.sub, select, string.len, type, tostring  -- a script may rebind the globals
local function set_end(p, i)  -- p[i] is "[": the index after its closing "]" (as lstrlib's classEnd)
  local j = i + 1
  if ssub(p, j, j) == "^" then j = j + 1 end
  repeat
    if j > #p then return #p + 1 end  -- malformed: the call itself says so
    local ch = ssub(p, j, j)
    j = j + (ch == "%" and 2 or 1)
  until ssub(p, j, j) == "]"
  return j + 1
end
local function guard(s, p, anchorable)
  if type(s) == "number" then s = tostring(s) end
  if type(p) == "number" then p = tostring(p) end
  if type(s) ~= "string" or type(p) ~= "string" then return end  -- the call itself refuses them
  local n, m, i, bound = #s, #p, 1, #s + 1
  if anchorable and ssub(p, 1, 1) == "^" then bound, i = 1, 2 end
  local matched = {}
  while i <= m do
    local c, item, j = ssub(p, i, i), nil, nil
    if c == "(" or c == ")" then
      i = i + 1
    elseif c == "%" then
      local d = ssub(p, i + 1, i + 1)
      if d == "b" then bound, i = bound * (n + 1), i + 4
      elseif d == "f" then i = set_end(p, i + 2)
      elseif sfind(d, "^%d$") then bound, i = bound * (n + 1), i + 2
      else item, j = ssub(p, i, i + 1), i + 2 end
    elseif c == "[" then
      j = set_end(p, i); item = ssub(p, i, j - 1)
    else
      item, j = c, i + 1
    end
    if item then
      local q, rest = ssub(p, j, j), ssub(p, j + 1)
      if (q == "*" or q == "+" or q == "-") and not sfind(rest, "^%)*$") then  -- a last item never backtracks
        local k = matched[item]
        if k == nil then k = sel(2, sgsub(s, item, "")); matched[item] = k end
        bound, i = bound * (k + 1), j + 1
      elseif q == "*" or q == "+" or q == "-" or q == "?" then
        bound, i = bound * (q == "?" and 2 or 1), j + 1
      else
        i = j
      end
    end
    if bound > PATTERN_BUDGET then
      fail(("pattern %q over %d characters could backtrack too long (more than %d steps)"):format(
        slen(p) > 40 and ssub(p, 1, 40) .. "..." or p, n, PATTERN_BUDGET), 3)
    end
  end
end
string.find = function(s, p, init, plain)
  if not plain then guard(s, p, true) end
  return sfind(s, p, init, plain)
end
string.match = function(s, p, init) guard(s, p, true); return smatch(s, p, init) end
string.gmatch = function(s, p, init) guard(s, p, false); return sgmatch(s, p, init) end
string.gsub = function(s, p, repl, limit) guard(s, p, true); return sgsub(s, p, repl, limit) end
return function(step, budget, seconds)
  local used, deadline = 0, clock() + seconds
  sethook(function()
    used = used + step
    if used > budget then fail("instruction limit exceeded", 0) end
    if clock() > deadline then fail("timeout", 0) end
  end, "", step)
end
"""
_STEP = 1000  # instructions between two checks of the budget and the clock


class LuaScriptError(Exception):
    """A script that does not compile, fails, runs too long or too big, or returns the wrong shape."""

    def __init__(self, function: str, reason: str) -> None:
        super().__init__(f"{function}: {reason}")
        self.function = function
        self.reason = reason

    @property
    def timed_out(self) -> bool:
        """It ran its whole wall-clock bound: each run again would cost that much again."""
        return self.reason == "timeout"


@dataclass(frozen=True, slots=True)
class Limits:
    # a customization's script runs a few thousand instructions; the bounds keep a runaway one from
    # holding a controller's event loop for more than a fraction of a second
    instructions: int = 5_000_000
    seconds: float = 0.5
    memory: int = 32 * 1024 * 1024  # bytes
    # a bound on one pattern match's backtracking (run in C, unseen by the instruction count): at
    # most ~4 ns a step measured, so ~0.1 s
    pattern_steps: int = 25_000_000


class LuaSandbox:
    """Runs one function of a script with Python values in and out."""

    def __init__(self, limits: Limits | None = None,
                 helpers: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.limits = limits or Limits()
        self.helpers = dict(helpers or {})

    def check(self, script: str, function: str) -> None:
        """Raise `LuaScriptError` unless ``script`` compiles and defines ``function``."""
        rt, arm = self._runtime()
        self._load(rt, arm, script, function)

    def call(self, script: str, function: str, *args: Any,
             like: Sequence[Any] = ()) -> tuple[Any, ...]:
        """Every value ``function(*args)`` returns, as Python values. ``like[i]`` is the Python value
        the i-th result stands for (it says whether an empty table was a list or a mapping)."""
        rt, arm = self._runtime()
        fn = self._load(rt, arm, script, function)
        out = _guarded(function, fn, *(to_lua(rt, a) for a in args))
        results = out if isinstance(out, tuple) else (out,)
        return tuple(to_python(v, like[i] if i < len(like) else None) for i, v in enumerate(results))

    def _runtime(self) -> tuple[Any, Any]:
        rt = lua54.LuaRuntime(register_eval=False, register_builtins=False, unpack_returned_tuples=True,
                              max_memory=self.limits.memory, attribute_filter=_no_attributes)
        kube = rt.table()
        for name, helper in self.helpers.items():
            kube[name] = _bridged(rt, helper)
        arm = rt.execute(_BOOTSTRAP, kube, time.monotonic, self.limits.pattern_steps)  # the clock: kept from the script
        return rt, arm

    def _load(self, rt: Any, arm: Any, script: str, function: str) -> Any:
        """``function`` of ``script``, the script's top level run under the limits the call runs under."""
        try:
            chunk = rt.compile(script)
        except lua54.LuaSyntaxError as e:
            raise LuaScriptError(function, f"does not compile: {_message(e)}") from None
        except lua54.LuaError as e:  # lupa reports some syntax errors as plain errors
            raise LuaScriptError(function, f"does not compile: {_message(e)}") from None
        arm(_STEP, self.limits.instructions, self.limits.seconds)
        _guarded(function, chunk)
        fn = rt.globals()[function]
        if lua54.lua_type(fn) != "function":
            raise LuaScriptError(function, f"the script does not define function {function}")
        return fn


def _guarded(function: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except lua54.LuaMemoryError:
        raise LuaScriptError(function, "memory limit exceeded") from None
    except lua54.LuaError as e:
        raise LuaScriptError(function, _message(e)) from None
    except (AttributeError, TypeError, ValueError, ArithmeticError) as e:  # raised in a helper, or refused
        raise LuaScriptError(function, str(e) or type(e).__name__) from None


def _no_attributes(obj: Any, name: str, setting: bool) -> str:
    raise AttributeError("attribute access is not allowed in interpreter scripts")


def _message(e: Exception) -> str:
    text = str(e).strip()
    return text.removeprefix("error loading code: ").removeprefix('[string "<python>"]:') or type(e).__name__


def _bridged(rt: Any, helper: Callable[..., Any]) -> Callable[..., Any]:
    """``helper`` callable from Lua: tables in become Python values, its result goes back as tables."""
    def call(*args: Any) -> Any:
        return to_lua(rt, helper(*(to_python(a) for a in args)))
    return call


def to_lua(rt: Any, value: Any) -> Any:
    if isinstance(value, Mapping):
        t = rt.table()
        for k, v in value.items():
            if v is not None:
                t[k] = to_lua(rt, v)
        return t
    if isinstance(value, list | tuple):
        t = rt.table()
        for i, v in enumerate(value, 1):
            t[i] = to_lua(rt, v)
        return t
    return value


def to_python(value: Any, like: Any = None) -> Any:
    """A Lua value as JSON-like Python (``like``: what it was before, for empty tables and integers)."""
    kind = lua54.lua_type(value)
    if kind in ("function", "userdata", "thread"):
        return None  # not data: nothing an object can hold
    if kind != "table":
        if isinstance(value, float) and value.is_integer() and isinstance(like, int):
            return int(value)
        return value
    items = list(value.items())
    if not items:
        return [] if isinstance(like, list) else {}
    keys = [k for k, _ in items]
    if all(isinstance(k, int) and not isinstance(k, bool) for k in keys) and sorted(keys) == list(
            range(1, len(keys) + 1)):
        seq = like if isinstance(like, list) else []
        return [to_python(v, seq[k - 1] if k - 1 < len(seq) else None) for k, v in sorted(items)]
    old = like if isinstance(like, Mapping) else {}
    return {str(k): to_python(v, old.get(str(k))) for k, v in items}
