"""Debian's chromium, headless, driven by Selenium: one session and the server it browses.

Every page load records Content-Security-Policy violations and `alert` calls through a script the
driver installs before the page's own (CDP's addScriptToEvaluateOnNewDocument is exempt from the CSP),
so a test can assert that upstream text ran nothing and the policy had nothing to block.
"""

from __future__ import annotations

import base64
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
DESKTOP = (1280, 900)
PHONE = (390, 844)
WATCH_SCRIPT = """
window.__hubwatch = {violations: [], alerts: []};
document.addEventListener('securitypolicyviolation', function (e) {
  window.__hubwatch.violations.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + (e.sample || ''));
});
['alert', 'confirm', 'prompt'].forEach(function (name) {
  window[name] = function (m) { window.__hubwatch.alerts.push(name + ':' + String(m)); };
});
"""


def chromium_binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@dataclass
class Browser:
    """One headless chromium session and the server it browses."""

    driver: Any
    base: str

    def open(self, path: str, size: tuple[int, int] = DESKTOP) -> None:
        self.resize(size)
        self.driver.get(self.base + path)

    def resize(self, size: tuple[int, int]) -> None:
        width, height = size
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})

    def report(self) -> dict[str, list[str]]:
        """What the page's CSP blocked and which dialogs something tried to open, since it loaded."""
        return self.driver.execute_script("return window.__hubwatch || {violations: ['watcher missing'], alerts: []};")

    def console_errors(self) -> list[str]:
        """Console errors other than the browser's own favicon request."""
        return [e["message"] for e in self.driver.get_log("browser")
                if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]]

    def screenshot(self, name: str) -> Path:
        """The whole page as a PNG under test-artifacts/browser/."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path = ARTIFACTS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
