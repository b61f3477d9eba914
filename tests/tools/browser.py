#!/usr/bin/python3
"""browser.py - open a URL in Debian's headless Chromium (DevTools protocol)
and report where it ended up: how the tests see edge's challenge page.

    browser.py --url URL [--profile DIR] [--timeout S] [--screenshot F.png]
               [--shot-early] [--wait-title-not TITLE]
               [--host-resolver-rules "MAP a.test 10.200.1.1"]
               [--ignore-cert-errors] [--cert-spki B64] [--quic-origin HOST:PORT]
               [--loads N] [--until-protocol P]

Starts `chromium --headless=new` (no sandbox, no proxy; $CHROMIUM names
another binary) on the profile DIR, or on a temporary one removed after,
navigates a new tab to URL and waits until the document has loaded and its
title is not TITLE ("solving": the title the challenge page has while it
works; it then submits and the browser follows edge's redirect), at most
S seconds (120). Then prints one JSON object on stdout:
  {"url", "title", "body" (innerText, first 2000 characters),
   "cookies": [{name, value, domain, path, httpOnly, secure, sameSite,
                expires}],
   "solved": sessionStorage "edge_challenge" parsed (the page's
             {n, ms, method}) or null,
   "status": the HTTP status of the last main-frame document response}
and exits 0; on timeout the same with "timeout": true, exit 1; on
failure (Chromium did not start, ...) a message on stderr, exit 2.
"protocols" lists each main-frame document response's protocol as
Chromium reports it ("http/1.1", "h2", "h3"), "protocol" the last.
--cert-spki trusts a certificate whose public key's SHA-256 (base64) is
B64 (--ignore-certificate-errors-spki-list), as QUIC requires: Chromium
refuses QUIC to a certificate --ignore-cert-errors lets through.
--quic-origin HOST:PORT forces QUIC to that origin
(--origin-to-force-quic-on); it also lets QUIC accept a certificate of no
known root for HOST whatever the port, which QUIC learnt from Alt-Svc
needs. --loads N: once loaded, reload the page until it has been loaded
N times (1), each time as above. --until-protocol P: stop reloading as
soon as a load came over P ("h3"), N being the most loads; a reload then
waits 0.5 s first. (Chromium keeps an existing HTTP/2 connection for the
requests made while the QUIC connection Alt-Svc told it of is still being
set up in the background: which reload is the first over HTTP/3 depends
on timing.)
--screenshot saves a PNG of the final page, or with --shot-early of the
page while its title is still TITLE (300 ms after it loaded). Chromium is
closed (its cookies saved in DIR; session cookies, which Chromium drops,
in DIR/browser_py_session_cookies.json, set again by the next run: a
second run on the same DIR has all of them, as if the browser had stayed
open) and killed, and a temporary profile removed, also on errors and on
SIGTERM.
Needs /usr/bin/python3 with the websockets module (10.x, asyncio API).
"""
import argparse, asyncio, base64, json, os, shutil, signal, subprocess
import sys, tempfile, time
import websockets

JS_STATE = "[document.readyState, document.title, location.href, !!window.browser_py_mark]"
JS_RESULT = """(() => { let s = null;
  try { s = JSON.parse(sessionStorage.getItem("edge_challenge")); } catch (e) {}
  return {url: location.href, title: document.title, solved: s,
          body: document.body ? document.body.innerText.slice(0, 2000) : ""};
})()"""


class CDP:
    """One browser-level DevTools connection; sessions (flatten) ride on it."""

    def __init__(self, ws):
        self.ws, self.n, self.wait, self.on_event = ws, 0, {}, None

    async def pump(self):
        async for raw in self.ws:
            m = json.loads(raw)
            if "id" in m:
                f = self.wait.pop(m["id"], None)
                if f and not f.done():
                    f.set_result(m)
            elif self.on_event:
                self.on_event(m)

    async def call(self, method, params=None, session=None, timeout=10):
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        f = self.wait[self.n] = asyncio.get_running_loop().create_future()
        await self.ws.send(json.dumps(msg))
        r = await asyncio.wait_for(f, timeout)
        if "error" in r:
            raise RuntimeError("%s: %s" % (method, r["error"].get("message")))
        return r.get("result", {})


async def drive(a, ws_url):
    async with websockets.connect(ws_url, max_size=None, ping_interval=None) as ws:
        cdp = CDP(ws)
        pump = asyncio.ensure_future(cdp.pump())
        tid = (await cdp.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        sid = (await cdp.call("Target.attachToTarget",
                              {"targetId": tid, "flatten": True}))["sessionId"]
        status = {"status": None, "protocols": []}

        def on_event(m):  # the main frame's id is its target's id
            p = m.get("params", {})
            if (m.get("method") == "Network.responseReceived" and m.get("sessionId") == sid
                    and p.get("type") == "Document" and p.get("frameId") == tid):
                status["status"] = p["response"]["status"]
                status["protocols"].append(p["response"].get("protocol"))
        cdp.on_event = on_event
        for d in ("Page", "Network", "Runtime"):
            await cdp.call(d + ".enable", session=sid)
        if a.profile and os.path.exists(a.session_file):  # the last run's
            try:
                with open(a.session_file) as f:
                    await cdp.call("Storage.setCookies", {"cookies": json.load(f)})
            except (OSError, ValueError, RuntimeError) as e:
                print("browser.py: session cookies: %s" % e, file=sys.stderr)

        async def ev(expr, timeout=10):
            r = await cdp.call("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                               sid, timeout)
            return r["result"].get("value")

        async def shot():
            r = await cdp.call("Page.captureScreenshot", {"format": "png"}, sid, 20)
            with open(a.screenshot, "wb") as f:
                f.write(base64.b64decode(r["data"]))

        deadline = time.monotonic() + a.timeout
        try:
            nav = await cdp.call("Page.navigate", {"url": a.url}, sid, a.timeout)
        except asyncio.TimeoutError:  # no answer: reported as a timeout
            nav = {}
        if nav.get("errorText"):
            print("browser.py: navigate: " + nav["errorText"], file=sys.stderr)
        timed_out, loaded_at, shot_done, loads = True, None, False, 1
        while time.monotonic() < deadline:
            try:  # mark: set on the document a reload is to replace
                state, title, href, mark = await ev(JS_STATE, 5)
            except Exception:  # between documents: no context to evaluate in
                state = title = href = mark = None
            if (state == "complete" and (href != "about:blank" or a.url == "about:blank")
                    and not mark):
                if title != a.wait_title_not:
                    if loads >= a.loads or (a.until_protocol and status["protocols"]
                                            and status["protocols"][-1] == a.until_protocol):
                        timed_out = False
                        break
                    if a.until_protocol:
                        await asyncio.sleep(0.5)
                    await ev("window.browser_py_mark = true")
                    await cdp.call("Page.reload", session=sid)
                    loads += 1
                    continue
                loaded_at = loaded_at or time.monotonic()
                if (a.screenshot and a.shot_early and not shot_done
                        and time.monotonic() - loaded_at >= 0.3):
                    await shot()
                    shot_done = True
            await asyncio.sleep(0.1)
        if timed_out:  # a navigation still pending would hold the evaluation
            try:
                await cdp.call("Page.stopLoading", session=sid, timeout=2)
            except Exception:
                pass
        try:
            out = await ev(JS_RESULT, 5)
        except Exception as e:
            out = {"url": None, "title": None, "body": "", "solved": None,
                   "error": "evaluate: %r" % e}
        try:
            cookies = (await cdp.call("Storage.getCookies"))["cookies"]
        except RuntimeError:
            cookies = (await cdp.call("Network.getAllCookies", session=sid))["cookies"]
        if a.profile:  # Chromium forgets session cookies: keep them here
            keep = ("name", "value", "domain", "path", "httpOnly", "secure", "sameSite",
                    "priority", "sourceScheme", "sourcePort")
            with open(a.session_file, "w") as f:
                json.dump([{k: c[k] for k in keep if k in c}
                           for c in cookies if c.get("session")], f)
        keys = ("name", "value", "domain", "path", "httpOnly", "secure", "sameSite", "expires")
        out["cookies"] = [{k: c.get(k) for k in keys} for c in cookies]
        out["status"] = status["status"]
        out["protocols"] = status["protocols"]
        out["protocol"] = (status["protocols"] or [None])[-1]
        if timed_out:
            out["timeout"] = True
        if a.screenshot and not shot_done:
            await shot()
        try:  # a clean exit writes the cookies to the profile
            await cdp.call("Browser.close", timeout=5)
        except Exception:
            pass
        pump.cancel()
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--profile")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--screenshot")
    ap.add_argument("--shot-early", action="store_true")
    ap.add_argument("--wait-title-not", default="solving")
    ap.add_argument("--host-resolver-rules")
    ap.add_argument("--ignore-cert-errors", action="store_true")
    ap.add_argument("--cert-spki")
    ap.add_argument("--quic-origin")
    ap.add_argument("--loads", type=int, default=1)
    ap.add_argument("--until-protocol")
    a = ap.parse_args()

    def die(sig, frame):
        raise SystemExit(128 + sig)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, die)
    prof = a.profile or tempfile.mkdtemp(prefix="edge-browser-")
    os.makedirs(prof, exist_ok=True)
    port_file = os.path.join(prof, "DevToolsActivePort")
    a.session_file = os.path.join(prof, "browser_py_session_cookies.json")
    if os.path.exists(port_file):
        os.unlink(port_file)
    cmd = [os.environ.get("CHROMIUM", "chromium"), "--headless=new", "--no-sandbox",
           "--disable-gpu", "--disable-dev-shm-usage", "--no-proxy-server",
           "--no-first-run", "--no-default-browser-check", "--disable-extensions",
           "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--password-store=basic", "--use-mock-keychain",
           "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable",
           "--window-size=1024,768", "--user-data-dir=" + prof,
           "--remote-debugging-port=0"]
    if a.host_resolver_rules:
        cmd.append("--host-resolver-rules=" + a.host_resolver_rules)
    if a.ignore_cert_errors:
        cmd.append("--ignore-certificate-errors")
    if a.cert_spki:
        cmd.append("--ignore-certificate-errors-spki-list=" + a.cert_spki)
    if a.quic_origin:
        cmd += ["--enable-quic", "--origin-to-force-quic-on=" + a.quic_origin]
    errf = tempfile.TemporaryFile()
    proc, rc = None, 2
    try:
        proc = subprocess.Popen(cmd + ["about:blank"], stdin=subprocess.DEVNULL,
                                stdout=errf, stderr=errf, start_new_session=True)
        t = time.monotonic() + 30
        while True:
            try:
                with open(port_file) as f:
                    port, path = f.read().split()[:2]
                break
            except (OSError, ValueError):
                if proc.poll() is not None or time.monotonic() > t:
                    raise RuntimeError("chromium did not start")
                time.sleep(0.1)
        out = asyncio.run(drive(a, "ws://127.0.0.1:%s%s" % (port, path)))
        print(json.dumps(out))
        rc = 1 if out.get("timeout") else 0
    except Exception as e:
        errf.seek(0)
        tail = errf.read()[-2000:].decode(errors="replace")
        print("browser.py: %s\n%s" % (e, tail), file=sys.stderr)
    finally:
        if proc:
            for wait in ((5, 5) if rc != 2 else (0, 5)):  # closing, else SIGTERM
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    proc.terminate()
            try:  # its helpers (zygote, renderers) too
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        if not a.profile:
            shutil.rmtree(prof, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
