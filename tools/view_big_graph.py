"""python tools/view_big_graph.py -- Issue 34's '50,000-node graph opens in under 2 s': page written, then opened in
headless Chromium until data-ready (the page's own layout time printed)."""

import sys, time, tempfile

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
import graphc as gc
from tests.viz.test_view import big_graph
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

g = big_graph(50_000)
t0 = time.perf_counter()
path = gc.viz.view(g, tempfile.mkdtemp() + "/big.html")
t1 = time.perf_counter()
o = webdriver.ChromeOptions()
o.binary_location = "/usr/bin/chromium"
for f in (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--window-size=1400,900",
    f"--user-data-dir={tempfile.mkdtemp()}",
):
    o.add_argument(f)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
try:
    t2 = time.perf_counter()
    d.get("file://" + str(path))
    body = d.find_element("tag name", "body")
    WebDriverWait(d, 60).until(lambda _: body.get_attribute("data-ready"))
    t3 = time.perf_counter()
    status = (
        d.find_element("css selector", "footer, #status").text
        if d.find_elements("css selector", "footer, #status")
        else ""
    )
    print(
        f"write page {t1 - t0:.2f} s; open until ready {t3 - t2:.2f} s; boxes {body.get_attribute('data-visible')}; {status}"
    )
finally:
    d.quit()
