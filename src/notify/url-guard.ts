/**
 * SSRF protection for webhook endpoints: which addresses a webhook may never reach, the
 * save-time URL check, and a `lookup` for node:http that refuses forbidden addresses at
 * connect time (defeating DNS rebinding between the check and the request).
 */
import { promises as dns } from "node:dns";
import type { LookupAddress } from "node:dns";
import { BlockList, isIP } from "node:net";
import type { LookupFunction } from "node:net";
import { ipv6Groups } from "../domain/addresses.ts";

/** dns.promises.lookup with `all: true` (injectable for tests). */
export type LookupAll = (hostname: string, options: { all: true; verbatim: true; family?: 0 | 4 | 6; hints?: number }) => Promise<LookupAddress[]>;

export class ForbiddenUrlError extends Error {
  /** What is wrong, for people: never contains the URL's path or query (they may carry tokens). */
  readonly reason: string;
  constructor(reason: string) {
    super(reason);
    this.name = "ForbiddenUrlError";
    this.reason = reason;
  }
}

type Ranges = ReadonlyArray<readonly [kind: string, cidrs: readonly string[]]>;

/** First match wins: the narrow ranges come before the ones that contain them. */
const V4_RANGES: Ranges = [
  ["broadcast", ["255.255.255.255/32"]],
  ["cloud metadata", ["169.254.169.254/32"]],
  ["this-network", ["0.0.0.0/8"]],
  ["loopback", ["127.0.0.0/8"]],
  ["private", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]],
  ["carrier-grade NAT", ["100.64.0.0/10"]],
  ["link-local", ["169.254.0.0/16"]],
  ["multicast", ["224.0.0.0/4"]],
  ["reserved", ["240.0.0.0/4"]],
  // Not globally reachable per the IANA special-purpose registry; never a real receiver.
  ["special-purpose", ["192.0.0.0/24", "192.88.99.0/24"]],
  ["documentation", ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"]],
  ["benchmarking", ["198.18.0.0/15"]],
];

/** Applied after the IPv4-embedding prefixes (mapped, compatible, NAT64) have been judged by their IPv4 address. */
const V6_RANGES: Ranges = [
  ["unspecified", ["::/128"]],
  ["loopback", ["::1/128"]],
  ["cloud metadata", ["fd00:ec2::254/128"]],
  ["unique-local", ["fc00::/7"]],
  ["link-local", ["fe80::/10"]],
  ["site-local", ["fec0::/10"]],
  ["multicast", ["ff00::/8"]],
  ["discard-only", ["100::/64"]],
  // Teredo (2001::/32) and 6to4 (2002::/16) tunnel to an embedded IPv4 address; 64:ff9b:1::/48 is local-use NAT64.
  ["special-purpose", ["2001::/23", "2002::/16", "64:ff9b:1::/48", "5f00::/16"]],
  ["documentation", ["2001:db8::/32", "3fff::/20"]],
];

function compile(ranges: Ranges, family: "ipv4" | "ipv6"): ReadonlyArray<readonly [string, BlockList]> {
  return ranges.map(([kind, cidrs]) => {
    const list = new BlockList();
    for (const cidr of cidrs) {
      const [network, bits] = cidr.split("/") as [string, string];
      list.addSubnet(network, Number(bits), family);
    }
    return [kind, list] as const;
  });
}

const V4_LISTS = compile(V4_RANGES, "ipv4");
const V6_LISTS = compile(V6_RANGES, "ipv6");

/** The IPv4 address an IPv6 address stands for: mapped ::ffff:0:0/96, translated ::ffff:0:0:0/96, compatible ::/96, NAT64 64:ff9b::/96. */
function embeddedIpv4(groups: readonly number[]): string | null {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number];
  const zeroTo = (n: number): boolean => groups.slice(0, n).every((g) => g === 0);
  const embeds =
    (zeroTo(5) && g5 === 0xffff) || // mapped
    (zeroTo(4) && g4 === 0xffff && g5 === 0) || // translated (SIIT)
    (zeroTo(6) && (g6 !== 0 || g7 > 1)) || // compatible, not :: or ::1
    (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0); // NAT64
  return embeds ? `${g6 >> 8}.${g6 & 0xff}.${g7 >> 8}.${g7 & 0xff}` : null;
}

/**
 * Why a webhook may not reach `ip` ("loopback", "private", …), or null when it may. IPv6
 * addresses embedding an IPv4 one are judged by it; IPv6 outside the global unicast block
 * 2000::/3 is "reserved". Anything that is not an IP address is forbidden ("not an IP address").
 */
export function forbiddenKind(ip: string): string | null {
  const family = isIP(ip);
  if (family === 4) return V4_LISTS.find(([, list]) => list.check(ip, "ipv4"))?.[0] ?? null;
  if (family !== 6) return "not an IP address";
  const groups = ipv6Groups(ip);
  const v4 = embeddedIpv4(groups);
  if (v4 !== null) return forbiddenKind(v4);
  const bare = ip.split("%")[0]!;
  const kind = V6_LISTS.find(([, list]) => list.check(bare, "ipv6"))?.[0];
  if (kind !== undefined) return kind;
  return (groups[0]! & 0xe000) === 0x2000 ? null : "reserved";
}

/** "10.0.0.7, a private address" / "::ffff:7f00:1 (127.0.0.1), a loopback address" */
function describe(ip: string, kind: string): string {
  if (isIP(ip) === 0) return `${JSON.stringify(ip)}, not an IP address`;
  const v4 = isIP(ip) === 6 ? embeddedIpv4(ipv6Groups(ip)) : null;
  const article = /^(?:[aeio]|un(?!i))/i.test(kind) ? "an" : "a";
  return `${ip}${v4 === null ? "" : ` (${v4})`}, ${article} ${kind} address`;
}

/** The URL without path, query or credentials, for messages. */
function shown(url: URL): string {
  return `${url.protocol}//${url.host}/`;
}

function hostOf(url: URL): string {
  return url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * Every check that needs no DNS: a URL, http: or https:, no credentials, a host, and (unless
 * allowPrivate) an IP-literal host that is not forbidden. Throws ForbiddenUrlError.
 */
export function precheckEndpointUrl(raw: string, allowPrivate: boolean): URL {
  const url = URL.parse(raw);
  if (url === null) throw new ForbiddenUrlError("not a valid URL");
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new ForbiddenUrlError(`scheme ${url.protocol} is not allowed (http: or https: only)`);
  if (url.username !== "" || url.password !== "") throw new ForbiddenUrlError(`${shown(url)} has credentials in it; they are not allowed`);
  const host = hostOf(url);
  if (host === "") throw new ForbiddenUrlError("the URL has no host");
  if (!allowPrivate && isIP(host) !== 0) {
    const kind = forbiddenKind(host);
    if (kind !== null) throw new ForbiddenUrlError(`${shown(url)} is ${describe(host, kind)}`);
  }
  return url;
}

function codeOf(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "lookup failed";
}

/** The first forbidden address among `addresses`, described, or null. */
function firstForbidden(addresses: readonly LookupAddress[]): string | null {
  for (const { address } of addresses) {
    const kind = forbiddenKind(address);
    if (kind !== null) return describe(address, kind);
  }
  return null;
}

/**
 * Save-time check of an endpoint URL: precheckEndpointUrl, then (unless allowPrivate) the
 * host must resolve and ALL of its addresses must be allowed. Throws ForbiddenUrlError.
 */
export async function checkEndpointUrl(raw: string, options: { allowPrivate: boolean; lookup?: LookupAll }): Promise<URL> {
  const url = precheckEndpointUrl(raw, options.allowPrivate);
  const host = hostOf(url);
  if (options.allowPrivate || isIP(host) !== 0) return url;
  const lookup: LookupAll = options.lookup ?? dns.lookup;
  let addresses: LookupAddress[];
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch (err) {
    throw new ForbiddenUrlError(`${host} does not resolve (${codeOf(err)})`);
  }
  if (addresses.length === 0) throw new ForbiddenUrlError(`${host} does not resolve (no addresses)`);
  const bad = firstForbidden(addresses);
  if (bad !== null) throw new ForbiddenUrlError(`${shown(url)} resolves to ${bad}`);
  return url;
}

function familyOf(family: unknown): 0 | 4 | 6 {
  return family === 4 || family === "IPv4" ? 4 : family === 6 || family === "IPv6" ? 6 : 0;
}

/**
 * A `lookup` for http.request / https.request: resolves all addresses and calls back with a
 * ForbiddenUrlError (so Node never connects) when any of them is forbidden. Node calls it
 * with `all: true` (autoSelectFamily, the default) and expects an array, or without `all`
 * (a `family` was given) and expects (address, family). IP-literal hosts never reach it.
 */
export function guardedLookup(options: { allowPrivate: boolean; lookup?: LookupAll }): LookupFunction {
  const lookup: LookupAll = options.lookup ?? dns.lookup;
  return (hostname, lookupOptions, callback) => {
    const family = familyOf(lookupOptions.family);
    const query = { all: true, verbatim: true, ...(family === 0 ? {} : { family }), ...(lookupOptions.hints ? { hints: lookupOptions.hints } : {}) } as const;
    lookup(hostname, query).then(
      (addresses) => {
        if (addresses.length === 0) {
          callback(Object.assign(new Error(`${hostname} does not resolve (no addresses)`), { code: "ENOTFOUND" }), lookupOptions.all ? [] : "");
          return;
        }
        // Node throws (an uncaught exception, from here) on a non-IP answer: refuse it instead.
        const invalid = addresses.find((a) => isIP(a.address) === 0);
        if (invalid !== undefined) {
          callback(new ForbiddenUrlError(`${hostname} resolves to ${describe(invalid.address, "not an IP address")}`), lookupOptions.all ? [] : "");
          return;
        }
        const bad = options.allowPrivate ? null : firstForbidden(addresses);
        if (bad !== null) {
          callback(new ForbiddenUrlError(`${hostname} resolves to ${bad}`), lookupOptions.all ? [] : "");
        } else if (lookupOptions.all) {
          callback(null, addresses);
        } else {
          const first = addresses[0]!;
          callback(null, first.address, first.family);
        }
      },
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), lookupOptions.all ? [] : ""),
    );
  };
}
