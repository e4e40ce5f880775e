/**
 * The SSRF guard. No test here sends traffic anywhere but loopback: hostnames resolve through
 * injected lookups, and the two sendWebhook calls aimed at 10.0.0.1 prove refusal comes first.
 */
import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import http from "node:http";
import net from "node:net";
import { describe, it, mock } from "node:test";
import { sendWebhook } from "../../src/notify/send.ts";
import { checkEndpointUrl, ForbiddenUrlError, forbiddenKind, guardedLookup } from "../../src/notify/url-guard.ts";
import type { LookupAll } from "../../src/notify/url-guard.ts";

/** [address, kind it is forbidden as, or null when allowed]: first/last of each range and its neighbours. */
const TABLE: ReadonlyArray<readonly [string, string | null]> = [
  // 0.0.0.0/8
  ["0.0.0.0", "this-network"],
  ["0.255.255.255", "this-network"],
  ["1.0.0.0", null],
  // 10/8
  ["9.255.255.255", null],
  ["10.0.0.0", "private"],
  ["10.255.255.255", "private"],
  ["11.0.0.0", null],
  // 100.64/10
  ["100.63.255.255", null],
  ["100.64.0.0", "carrier-grade NAT"],
  ["100.127.255.255", "carrier-grade NAT"],
  ["100.128.0.0", null],
  // 127/8
  ["126.255.255.255", null],
  ["127.0.0.0", "loopback"],
  ["127.0.0.1", "loopback"],
  ["127.255.255.255", "loopback"],
  ["128.0.0.0", null],
  // 169.254/16 and the metadata address in it
  ["169.253.255.255", null],
  ["169.254.0.0", "link-local"],
  ["169.254.169.253", "link-local"],
  ["169.254.169.254", "cloud metadata"],
  ["169.254.169.255", "link-local"],
  ["169.254.255.255", "link-local"],
  ["169.255.0.0", null],
  // 172.16/12
  ["172.15.255.255", null],
  ["172.16.0.0", "private"],
  ["172.31.255.255", "private"],
  ["172.32.0.0", null],
  // 192.0.0/24, 192.0.2/24
  ["191.255.255.255", null],
  ["192.0.0.0", "special-purpose"],
  ["192.0.0.255", "special-purpose"],
  ["192.0.1.0", null],
  ["192.0.1.255", null],
  ["192.0.2.0", "documentation"],
  ["192.0.2.255", "documentation"],
  ["192.0.3.0", null],
  // 192.88.99/24 (former 6to4 relays)
  ["192.88.98.255", null],
  ["192.88.99.0", "special-purpose"],
  ["192.88.99.255", "special-purpose"],
  ["192.88.100.0", null],
  // 192.168/16
  ["192.167.255.255", null],
  ["192.168.0.0", "private"],
  ["192.168.255.255", "private"],
  ["192.169.0.0", null],
  // 198.18/15
  ["198.17.255.255", null],
  ["198.18.0.0", "benchmarking"],
  ["198.19.255.255", "benchmarking"],
  ["198.20.0.0", null],
  // 198.51.100/24, 203.0.113/24
  ["198.51.99.255", null],
  ["198.51.100.0", "documentation"],
  ["198.51.100.255", "documentation"],
  ["198.51.101.0", null],
  ["203.0.112.255", null],
  ["203.0.113.0", "documentation"],
  ["203.0.113.255", "documentation"],
  ["203.0.114.0", null],
  // 224/4, 240/4, broadcast
  ["223.255.255.255", null],
  ["224.0.0.0", "multicast"],
  ["239.255.255.255", "multicast"],
  ["240.0.0.0", "reserved"],
  ["255.255.255.254", "reserved"],
  ["255.255.255.255", "broadcast"],
  // public
  ["8.8.8.8", null],
  ["93.184.216.34", null],

  // IPv6: unspecified, loopback, IPv4-compatible ::/96 (judged by the IPv4 address)
  ["::", "unspecified"],
  ["::1", "loopback"],
  ["::2", "this-network"],
  ["::127.0.0.1", "loopback"],
  ["::808:808", null],
  // IPv4-mapped ::ffff:0:0/96, dotted and hex
  ["::ffff:0.0.0.0", "this-network"],
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["::ffff:a00:7", "private"],
  ["::ffff:169.254.169.254", "cloud metadata"],
  ["::ffff:a9fe:a9fe", "cloud metadata"],
  ["::ffff:255.255.255.255", "broadcast"],
  ["::ffff:8.8.8.8", null],
  ["::ffff:808:808", null],
  ["0:0:0:0:0:ffff:7f00:1", "loopback"],
  ["::fffe:ffff:ffff", "reserved"],
  // IPv4-translated ::ffff:0:0:0/96
  ["::ffff:0:7f00:1", "loopback"],
  ["::ffff:0:808:808", null],
  // NAT64 64:ff9b::/96 (judged by the IPv4 address); the rest of 64:ff9b::/32 is not global unicast
  ["64:ff9b::10.0.0.1", "private"],
  ["64:ff9b::7f00:1", "loopback"],
  ["64:ff9b::8.8.8.8", null],
  ["64:ff9b::1:0:0", "reserved"],
  ["64:ff9b:1::", "special-purpose"],
  ["64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "special-purpose"],
  // discard-only 100::/64
  ["100::", "discard-only"],
  ["100::ffff:ffff:ffff:ffff", "discard-only"],
  ["100:0:0:1::", "reserved"],
  // outside global unicast 2000::/3
  ["1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"],
  ["2000::", null],
  ["3fff:1000::", null],
  ["4000::", "reserved"],
  // 2001::/23 (Teredo, benchmarking, ORCHID…), 2001:db8::/32, 2002::/16 (6to4), 3fff::/20
  ["2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", null],
  ["2001::", "special-purpose"],
  ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "special-purpose"],
  ["2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "special-purpose"],
  ["2001:200::", null],
  ["2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", null],
  ["2001:db8::", "documentation"],
  ["2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"],
  ["2001:db9::", null],
  ["2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", null],
  ["2002::", "special-purpose"],
  ["2002:7f00:1::", "special-purpose"],
  ["2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "special-purpose"],
  ["2003::", null],
  ["3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", null],
  ["3fff::", "documentation"],
  ["3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"],
  // unique-local fc00::/7 with the metadata address, link-local, site-local, multicast
  ["fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"],
  ["fc00::", "unique-local"],
  ["fd00:ec2::253", "unique-local"],
  ["fd00:ec2::254", "cloud metadata"],
  ["fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique-local"],
  ["fe00::", "reserved"],
  ["fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "reserved"],
  ["fe80::", "link-local"],
  ["fe80::1%eth0", "link-local"],
  ["febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"],
  ["fec0::", "site-local"],
  ["feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "site-local"],
  ["ff00::", "multicast"],
  ["ff02::1", "multicast"],
  ["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast"],
  // public
  ["2606:2800:220:1:248:1893:25c8:1946", null],
  ["2a00:1450:4001:80b::200e", null],
  // not addresses at all
  ["", "not an IP address"],
  ["localhost", "not an IP address"],
  ["010.0.0.1", "not an IP address"],
  ["[::1]", "not an IP address"],
];

function lookupOf(table: Record<string, string[]>): LookupAll & { calls: string[]; table: Record<string, string[]> } {
  const calls: string[] = [];
  const lookup = async (hostname: string): Promise<LookupAddress[]> => {
    calls.push(hostname);
    const addresses = table[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return addresses.map((address) => ({ address, family: net.isIP(address) }));
  };
  return Object.assign(lookup, { calls, table });
}

async function refused(raw: string, options: { allowPrivate: boolean; lookup?: LookupAll }, reason: RegExp): Promise<void> {
  await assert.rejects(checkEndpointUrl(raw, options), (err: unknown) => {
    assert.ok(err instanceof ForbiddenUrlError, String(err));
    assert.match(err.reason, reason);
    return true;
  });
}

describe("forbiddenKind", () => {
  for (const [ip, kind] of TABLE) {
    it(`${ip || "(empty)"} → ${kind ?? "allowed"}`, () => {
      assert.equal(forbiddenKind(ip), kind);
    });
  }
});

describe("checkEndpointUrl", () => {
  const noDns = lookupOf({});

  it("refuses what is not an http(s) URL", async () => {
    await refused("not a url", { allowPrivate: false, lookup: noDns }, /not a valid URL/);
    await refused("ftp://example.com/hooks", { allowPrivate: false, lookup: noDns }, /scheme ftp: is not allowed/);
    await refused("javascript:alert(1)", { allowPrivate: true, lookup: noDns }, /scheme javascript: is not allowed/);
    await refused("file:///etc/passwd", { allowPrivate: true, lookup: noDns }, /scheme file: is not allowed/);
    await refused("data:text/plain,hi", { allowPrivate: true, lookup: noDns }, /scheme data: is not allowed/);
    assert.deepEqual(noDns.calls, []);
  });

  it("refuses credentials in the URL, without echoing them", async () => {
    for (const raw of ["https://user:hunter2@hooks.example.com/x", "https://user@hooks.example.com/x", "https://:hunter2@hooks.example.com/x"]) {
      await assert.rejects(checkEndpointUrl(raw, { allowPrivate: true, lookup: noDns }), (err: unknown) => {
        assert.ok(err instanceof ForbiddenUrlError);
        assert.match(err.reason, /credentials/);
        assert.doesNotMatch(err.reason, /hunter2|user/);
        return true;
      });
    }
  });

  it("judges IP literals directly, v4, v6 and mapped, in every form the URL parser accepts", async () => {
    const cases: ReadonlyArray<readonly [string, RegExp]> = [
      ["http://127.0.0.1:8080/hook", /127\.0\.0\.1, a loopback address/],
      ["http://0.0.0.0/", /a this-network address/],
      ["http://10.0.0.7/", /a private address/],
      ["http://172.16.5.4/", /a private address/],
      ["http://192.168.1.1/", /a private address/],
      ["http://100.64.0.1/", /a carrier-grade NAT address/],
      ["http://169.254.169.254/latest/meta-data/", /a cloud metadata address/],
      ["http://169.254.1.1/", /a link-local address/],
      ["http://224.0.0.1/", /a multicast address/],
      ["http://240.0.0.1/", /a reserved address/],
      ["http://255.255.255.255/", /a broadcast address/],
      ["http://2130706433/", /127\.0\.0\.1, a loopback address/],
      ["http://0x7f.1/", /127\.0\.0\.1, a loopback address/],
      ["http://0177.0.0.1/", /127\.0\.0\.1, a loopback address/],
      ["http://[::1]/", /::1, a loopback address/],
      ["http://[::]/", /an unspecified address/],
      ["http://[fd00::1]/", /a unique-local address/],
      ["http://[fd00:ec2::254]/", /a cloud metadata address/],
      ["http://[fe80::1]/", /a link-local address/],
      ["http://[fec0::1]/", /a site-local address/],
      ["http://[ff02::1]/", /a multicast address/],
      ["http://[::ffff:127.0.0.1]/", /::ffff:7f00:1 \(127\.0\.0\.1\), a loopback address/],
      ["http://[::ffff:a9fe:a9fe]/", /\(169\.254\.169\.254\), a cloud metadata address/],
      ["http://[64:ff9b::10.0.0.1]/", /\(10\.0\.0\.1\), a private address/],
    ];
    for (const [raw, reason] of cases) await refused(raw, { allowPrivate: false, lookup: noDns }, reason);
    assert.deepEqual(noDns.calls, []);
  });

  it("the reason shows the origin only, never path or query", async () => {
    await refused("https://10.0.0.7:8443/hooks?token=s3cret", { allowPrivate: false, lookup: noDns }, /^https:\/\/10\.0\.0\.7:8443\/ is 10\.0\.0\.7, a private address$/);
  });

  it("refuses a hostname when ANY of its addresses is forbidden", async () => {
    const lookup = lookupOf({
      "x.internal": ["10.0.0.7"],
      "mixed.example": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "127.0.0.1"],
      "v6.example": ["93.184.216.34", "::ffff:7f00:1"],
      "meta.example": ["169.254.169.254"],
    });
    await refused("https://x.internal/", { allowPrivate: false, lookup }, /^https:\/\/x\.internal\/ resolves to 10\.0\.0\.7, a private address$/);
    await refused("https://mixed.example/hook", { allowPrivate: false, lookup }, /resolves to 127\.0\.0\.1, a loopback address/);
    await refused("https://v6.example/hook", { allowPrivate: false, lookup }, /resolves to ::ffff:7f00:1 \(127\.0\.0\.1\), a loopback address/);
    await refused("http://meta.example/", { allowPrivate: false, lookup }, /cloud metadata/);
  });

  it("refuses a hostname that does not resolve", async () => {
    const lookup = lookupOf({ "empty.example": [] });
    await refused("https://nowhere.invalid/", { allowPrivate: false, lookup }, /^nowhere\.invalid does not resolve \(ENOTFOUND\)$/);
    await refused("https://empty.example/", { allowPrivate: false, lookup }, /does not resolve \(no addresses\)/);
  });

  it("allows a public address and returns the parsed URL", async () => {
    const lookup = lookupOf({ "hooks.example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"] });
    const url = await checkEndpointUrl("https://hooks.example.com/tracklane?x=1", { allowPrivate: false, lookup });
    assert.equal(url.href, "https://hooks.example.com/tracklane?x=1");
    assert.deepEqual(lookup.calls, ["hooks.example.com"]);
    assert.equal((await checkEndpointUrl("http://93.184.216.34:8080/", { allowPrivate: false, lookup })).port, "8080");
    assert.equal((await checkEndpointUrl("http://[2606:2800:220:1:248:1893:25c8:1946]/", { allowPrivate: false, lookup })).protocol, "http:");
    assert.deepEqual(lookup.calls, ["hooks.example.com"]);
  });

  it("allowPrivate lifts the address checks, not the URL ones", async () => {
    const lookup = lookupOf({ "x.internal": ["10.0.0.7"] });
    assert.equal((await checkEndpointUrl("https://x.internal/", { allowPrivate: true, lookup })).hostname, "x.internal");
    assert.equal((await checkEndpointUrl("http://127.0.0.1:3000/", { allowPrivate: true, lookup })).port, "3000");
    assert.equal((await checkEndpointUrl("http://[::1]/", { allowPrivate: true, lookup })).hostname, "[::1]");
    await refused("ftp://127.0.0.1/", { allowPrivate: true, lookup }, /scheme/);
  });
});

describe("guardedLookup", () => {
  const lookup = lookupOf({ "ok.example": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"], "rebind.test": ["93.184.216.34", "10.0.0.1"] });

  function call(fn: net.LookupFunction, host: string, options: { all?: boolean; family?: number }): Promise<[Error | null, unknown, unknown]> {
    return new Promise((done) => fn(host, options, (err, address, family) => done([err, address, family])));
  }

  it("answers all: true calls with every address, and all: false calls with the first", async () => {
    const guarded = guardedLookup({ allowPrivate: false, lookup });
    assert.deepEqual(await call(guarded, "ok.example", { all: true }), [
      null,
      [
        { address: "93.184.216.34", family: 4 },
        { address: "2606:2800:220:1:248:1893:25c8:1946", family: 6 },
      ],
      undefined,
    ]);
    assert.deepEqual(await call(guarded, "ok.example", { family: 0 }), [null, "93.184.216.34", 4]);
  });

  it("calls back with a ForbiddenUrlError when any address is forbidden, in both forms", async () => {
    const guarded = guardedLookup({ allowPrivate: false, lookup });
    for (const options of [{ all: true }, {}]) {
      const [err] = await call(guarded, "rebind.test", options);
      assert.ok(err instanceof ForbiddenUrlError);
      assert.equal(err.reason, "rebind.test resolves to 10.0.0.1, a private address");
    }
    const [err] = await call(guarded, "nowhere.invalid", { all: true });
    assert.equal((err as NodeJS.ErrnoException).code, "ENOTFOUND");
  });

  it("lets every address through with allowPrivate, but never a non-address (Node would throw)", async () => {
    const guarded = guardedLookup({ allowPrivate: true, lookup: lookupOf({ ...lookup.table, "odd.test": ["93.184.216.34", "not-an-ip"] }) });
    assert.deepEqual(await call(guarded, "rebind.test", { family: 4 }), [null, "93.184.216.34", 4]);
    const [err] = await call(guarded, "odd.test", { all: true });
    assert.ok(err instanceof ForbiddenUrlError);
    assert.equal(err.reason, 'odd.test resolves to "not-an-ip", not an IP address');
  });
});

describe("sendWebhook refuses forbidden addresses before connecting", () => {
  /** Runs `fn` counting socket connect() calls and actual connection attempts (net's 'connectionAttempt'). */
  async function watchingSockets<T>(fn: () => Promise<T>): Promise<{ result: T; connectCalls: number; attempts: string[] }> {
    const original = net.Socket.prototype.connect;
    const attempts: string[] = [];
    const spy = mock.method(net.Socket.prototype, "connect", function (this: net.Socket, ...args: unknown[]) {
      this.on("connectionAttempt", (ip: string, port: number) => attempts.push(`${ip}:${port}`));
      return Reflect.apply(original, this, args) as net.Socket;
    });
    try {
      const result = await fn();
      return { result, connectCalls: spy.mock.callCount(), attempts };
    } finally {
      spy.mock.restore();
    }
  }

  const request = { headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 2000, allowPrivate: false };

  it("an IP-literal URL: no socket at all", async () => {
    const { result, connectCalls, attempts } = await watchingSockets(() => sendWebhook({ ...request, url: "http://10.0.0.1:9/" }));
    assert.equal(result.outcome, "failed");
    assert.equal(result.statusCode, null);
    assert.match(result.error ?? "", /^endpoint_url_forbidden: http:\/\/10\.0\.0\.1:9\/ is 10\.0\.0\.1, a private address$/);
    assert.equal(connectCalls, 0);
    assert.deepEqual(attempts, []);
  });

  it("a hostname resolving to a private address (DNS rebinding): refused in the lookup, no connection attempt", async () => {
    const lookup = lookupOf({ "rebind.test": ["10.0.0.1"] });
    const { result, connectCalls, attempts } = await watchingSockets(() => sendWebhook({ ...request, url: "http://rebind.test/", lookup }));
    assert.equal(result.outcome, "failed");
    assert.match(result.error ?? "", /^endpoint_url_forbidden: rebind\.test resolves to 10\.0\.0\.1, a private address$/);
    assert.deepEqual(lookup.calls, ["rebind.test"]);
    // net creates the socket and calls connect(), which runs the lookup; the guard stops it there.
    assert.equal(connectCalls, 1);
    assert.deepEqual(attempts, []);
  });

  it("(control) the watch does see a connection when one is made", async () => {
    const server = http.createServer((_req, res) => res.end());
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    const { port } = server.address() as net.AddressInfo;
    try {
      const lookup = lookupOf({ "receiver.test": ["127.0.0.1"] });
      const { result, connectCalls, attempts } = await watchingSockets(() => sendWebhook({ ...request, allowPrivate: true, url: `http://receiver.test:${port}/`, lookup }));
      assert.equal(result.outcome, "delivered");
      assert.equal(connectCalls, 1);
      assert.deepEqual(attempts, [`127.0.0.1:${port}`]);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
