/** TRUSTED_PROXIES's blocks and the client X-Forwarded-For names (src/domain/addresses.ts). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { forwardedClient, inBlocks, parseBlocks } from "../../src/domain/addresses.ts";

const blocks = (raw: string) => {
  const parsed = parseBlocks(raw);
  assert.deepEqual(parsed.problems, []);
  return parsed.blocks;
};

describe("address blocks", () => {
  it("takes addresses and CIDR blocks of either family; an IPv4-mapped address is its IPv4 address", () => {
    const b = blocks(" 10.0.0.0/8 ,192.168.1.1, fd00::/8, ::1, ::ffff:172.16.0.0/108");
    for (const inside of ["10.255.0.1", "::ffff:10.1.2.3", "192.168.1.1", "fd12::1", "::1", "172.31.255.255"]) assert.ok(inBlocks(inside, b), inside);
    for (const outside of ["11.0.0.1", "192.168.1.2", "fe80::1", "::2", "172.32.0.0", "unknown"]) assert.ok(!inBlocks(outside, b), outside);
    assert.ok(inBlocks("1.2.3.4", blocks("0.0.0.0/0")) && !inBlocks("::5", blocks("0.0.0.0/0")));
    assert.deepEqual(parseBlocks("").blocks, []);
  });

  it("names every entry that is not an address or block", () => {
    const { problems } = parseBlocks("10.0.0.0/33,10.0.0.0/8,proxy.internal,::1/129,10.0.0/8,1.2.3.4/");
    assert.deepEqual(problems.map((p) => /^"([^"]*)"/.exec(p)?.[1]), ["10.0.0.0/33", "proxy.internal", "::1/129", "10.0.0/8", "1.2.3.4/"]);
  });
});

describe("the forwarded client", () => {
  const trusted = blocks("10.0.0.0/8,fd00::/8");
  it("is the peer when the peer is not trusted, or nothing is", () => {
    assert.equal(forwardedClient("203.0.113.1", "198.51.100.7", trusted), "203.0.113.1");
    assert.equal(forwardedClient("10.0.0.1", "198.51.100.7", []), "10.0.0.1");
    assert.equal(forwardedClient("10.0.0.1", undefined, trusted), "10.0.0.1");
  });

  it("is the first untrusted address from the right, ports and brackets dropped", () => {
    assert.equal(forwardedClient("10.0.0.1", "198.51.100.7", trusted), "198.51.100.7");
    assert.equal(forwardedClient("::ffff:10.0.0.1", "spoofed, 1.1.1.1, 198.51.100.7 , 10.2.2.2,fd00::9", trusted), "198.51.100.7");
    assert.equal(forwardedClient("10.0.0.1", "198.51.100.7:5123", trusted), "198.51.100.7");
    assert.equal(forwardedClient("fd00::1", "[2001:db8::5]:443", trusted), "2001:db8::5");
    assert.equal(forwardedClient("10.0.0.1", "10.3.3.3, 10.4.4.4", trusted), "10.3.3.3", "every hop trusted: the leftmost");
  });

  it("is the peer when a hop it reads is not an address", () => {
    for (const header of ["", "unknown", "198.51.100.7, _obfuscated", "198.51.100.300", "198.51.100.7, 10.0.0.2 junk"]) {
      assert.equal(forwardedClient("10.0.0.1", header, trusted), "10.0.0.1", header);
    }
    assert.equal(forwardedClient("10.0.0.1", "junk, 198.51.100.7", trusted), "198.51.100.7", "junk left of the client is never read");
  });
});
