"""The sandbox interpreter scripts run in: nothing outside it is reachable, loops and allocations are
bounded, and objects cross as Lua tables and come back as they were."""

from __future__ import annotations

import time

import pytest

from drods.model.lua_kube import HELPERS
from drods.model.lua_sandbox import Limits, LuaSandbox, LuaScriptError

SANDBOX = LuaSandbox(Limits(instructions=5_000_000, seconds=2.0, memory=8 * 1024 * 1024), helpers=HELPERS)


def run(body: str, *args: object) -> tuple[object, ...]:
    return SANDBOX.call(f"function F(a, b)\n{body}\nend", "F", *args)


@pytest.mark.parametrize("body, says", [
    ("return os.getenv('HOME')", "global 'os'"),
    ("return io.open('/etc/passwd')", "global 'io'"),
    ("return require('os')", "module 'os' not found"),
    ("return load('return 1')()", "global 'load'"),
    ("return dofile('/etc/passwd')", "global 'dofile'"),
    ("return debug.getinfo(1)", "global 'debug'"),
    ("return package.loaded", "global 'package'"),
    ("return coroutine.create(F)", "global 'coroutine'"),
    ("return string.dump(F)", "field 'dump'"),
    ("return python.eval('1')", "global 'python'"),
    ("return require('kube').resourceAdd.__globals__", "attribute access is not allowed"),
])
def test_the_way_out_is_closed(body: str, says: str) -> None:
    with pytest.raises(LuaScriptError) as e:
        run(body)
    assert says in str(e.value)


def test_an_endless_loop_is_stopped_by_the_instruction_bound() -> None:
    with pytest.raises(LuaScriptError, match="instruction limit exceeded"):
        run("while true do end")


def test_a_slow_script_is_stopped_by_the_timeout() -> None:
    slow = LuaSandbox(Limits(instructions=10**15, seconds=0.2))
    started = time.monotonic()
    with pytest.raises(LuaScriptError, match="timeout"):
        slow.call("function F() local x = 0 while true do x = x + 1 end end", "F")
    assert 0.2 <= time.monotonic() - started < 1.5  # the wall clock bounds it, however loaded the machine


def test_no_finalizer_escapes_the_hook() -> None:
    """Finalizers run with the hook off: a looping ``__gc`` would never stop, so it is refused."""
    with pytest.raises(LuaScriptError, match="__gc metamethods are not allowed"):
        run("setmetatable({}, {__gc = function() while true do end end}) return 1")
    with pytest.raises(LuaScriptError, match="instruction limit exceeded"):  # __close runs under the hook
        run("local x <close> = setmetatable({}, {__close = function() while true do end end}) return 1")


@pytest.mark.parametrize("body", [
    "return string.find(string.rep('a', 200), string.rep('a*', 4) .. 'b')",  # ran 15 s in C, unseen
    "return (string.rep('a', 200)):find(string.rep('a*', 4) .. 'b')",  # the method form
    "return string.match(string.rep('a', 2000), 'a-a-b')",
    "for _ in string.gmatch(string.rep('a', 20000), 'a*b') do end",
    "return string.gsub(string.rep('(', 200000), '%b()', '')",
    "type = function() return 'table' end; return string.find(string.rep('a', 200), string.rep('a*', 4) .. 'b')",
])
def test_a_pattern_that_could_backtrack_for_seconds_is_refused_before_it_starts(body: str) -> None:
    started = time.monotonic()
    with pytest.raises(LuaScriptError, match="could backtrack too long"):
        run(body)
    assert time.monotonic() - started < 1.0  # refused, not run (the first ran 15 s)


@pytest.mark.parametrize("body, want", [
    ("return string.match('  web-1  ', '^%s*(.-)%s*$')", "web-1"),
    ("return string.match(string.rep('x', 900) .. string.rep(' ', 100), '^%s*(.-)%s*$'):len()", 900),
    ("return ('registry.io/app:v1'):match('^(.-):(.*)$')", "registry.io/app"),
    ("return (string.gsub(string.rep('a b ', 5000), '%s+', ''))", "ab" * 5000),
    ("local n = 0 for _ in ('a,b,,c'):gmatch('[^,]+') do n = n + 1 end return n", 3),
    ("return string.find(string.rep('a*', 10000), 'a*a*b', 1, true)", None),  # plain: no pattern
    ("return string.find('x]y', '[]]')", 2),
])
def test_the_patterns_scripts_use_still_match(body: str, want: object) -> None:
    assert run(body)[0] == want


def test_memory_is_bounded() -> None:
    with pytest.raises(LuaScriptError, match="memory limit exceeded"):
        run("local t = {} for i = 1, 1e8 do t[i] = string.rep('x', 64) .. i end return #t")


def test_a_top_level_loop_is_bounded_too() -> None:
    with pytest.raises(LuaScriptError, match="instruction limit exceeded"):
        SANDBOX.check("while true do end\nfunction F() end", "F")


def test_compile_errors_and_missing_functions_are_named() -> None:
    with pytest.raises(LuaScriptError, match="does not compile"):
        SANDBOX.check("function F( return end", "F")
    with pytest.raises(LuaScriptError, match="does not define function GetReplicas"):
        SANDBOX.check("function Other() end", "GetReplicas")
    with pytest.raises(LuaScriptError, match="boom"):
        run("error('boom')")


def test_objects_cross_faithfully() -> None:
    obj = {"spec": {"replicas": 3, "ratio": 0.5, "on": True, "tags": ["a", "b"], "empty": [], "none": {},
                    "items": [{"name": "x"}]}}
    (back,) = SANDBOX.call("function F(o) return o end", "F", obj, like=(obj,))
    assert back == obj
    (made,) = run("return {list = {1, 2, {x = 1}}, map = {k = 'v'}, n = 2, f = 2.5}")
    assert made == {"list": [1, 2, {"x": 1}], "map": {"k": "v"}, "n": 2, "f": 2.5}
    assert run("return a.spec.replicas * 2, #a.spec.tags", obj) == (6, 2)
    assert run("return unpack({1, 2})") == (1, 2)  # Lua 5.1's unpack, as Karmada's scripts use it


def test_kube_helpers() -> None:
    pod = {"metadata": {"namespace": "ml"},
           "spec": {"containers": [{"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
                                   {"resources": {"limits": {"cpu": "1"}}}],
                    "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
                    "nodeSelector": {"disk": "ssd"}, "priorityClassName": "high",
                    "serviceAccountName": "trainer",
                    "volumes": [{"configMap": {"name": "cfg"}}, {"persistentVolumeClaim": {"claimName": "data"}}]}}
    (req,) = run("return require('kube').accuratePodRequirements(a)", pod)
    assert req == {"resourceRequest": {"cpu": "2", "memory": "67108864"},
                   "nodeClaim": {"nodeSelector": {"disk": "ssd"}}, "namespace": "ml", "priorityClassName": "high"}
    (deps,) = run("return require('kube').getPodDependencies(a, 'ml')", pod)
    named = (("ConfigMap", "cfg"), ("PersistentVolumeClaim", "data"), ("ServiceAccount", "trainer"))
    assert deps == [{"apiVersion": "v1", "kind": k, "namespace": "ml", "name": n} for k, n in named]
    assert run("local kube = require('kube') return kube.resourceAdd('250m', '1', '0.5'), "
               "kube.getResourceQuantity('1500m')") == ("1750m", 1.5)
    with pytest.raises(LuaScriptError):
        run("return require('kube').getResourceQuantity('lots')")
