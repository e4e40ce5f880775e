/**
 * IP addresses and blocks: an IPv6 address's groups (also read by the notification URL
 * guard), TRUSTED_PROXIES (the reverse proxies in front of tracklane), and the client
 * address a request came from when one of them passed it on in X-Forwarded-For.
 */
import { isIP } from "node:net";

/** The eight 16-bit groups of an IPv6 address isIP() accepted (zone id dropped). */
export function ipv6Groups(ip: string): number[] {
  let text = ip.split("%")[0]!;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const parse = (part: string | undefined): number[] => (part ? part.split(":").map((g) => parseInt(g, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/** An address as a number and its width: IPv4 (also as ::ffff:a.b.c.d) 32 bits, IPv6 128; null if it is none. */
function asBits(address: string): { value: bigint; bits: 32 | 128 } | null {
  const family = isIP(address);
  if (family === 4) return { value: address.split(".").reduce((n, part) => (n << 8n) | BigInt(part), 0n), bits: 32 };
  if (family !== 6) return null;
  const groups = ipv6Groups(address);
  const value = groups.reduce((n, g) => (n << 16n) | BigInt(g), 0n);
  if (value >> 32n === 0xffffn) return { value: value & 0xffff_ffffn, bits: 32 }; // IPv4-mapped
  return { value, bits: 128 };
}

/** A block of addresses: `10.0.0.0/8`, `fd00::/8`, or one address (`127.0.0.1`: /32, `::1`: /128). */
export interface AddressBlock {
  value: bigint;
  bits: 32 | 128;
  prefix: number;
}

/** One entry of TRUSTED_PROXIES, or null when it is not an address or a CIDR block. */
export function parseBlock(text: string): AddressBlock | null {
  const match = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(text.trim());
  if (!match) return null;
  const address = asBits(match[1]!);
  if (address === null) return null;
  // ::ffff:10.0.0.0/104 is the IPv4 block 10.0.0.0/8.
  const mapped = address.bits === 32 && isIP(match[1]!) === 6;
  const written = match[2] === undefined ? (mapped ? 128 : address.bits) : Number(match[2]);
  const prefix = mapped ? written - 96 : written;
  if (prefix < 0 || prefix > address.bits) return null;
  return { ...address, prefix };
}

/**
 * TRUSTED_PROXIES: addresses and CIDR blocks separated by commas; the blocks, or what is
 * wrong (every bad entry, in one line).
 */
export function parseBlocks(raw: string): { blocks: AddressBlock[]; problems: string[] } {
  const entries = raw.split(",").map((e) => e.trim()).filter((e) => e !== "");
  const blocks: AddressBlock[] = [];
  const problems: string[] = [];
  for (const entry of entries) {
    const block = parseBlock(entry);
    if (block === null) problems.push(`${JSON.stringify(entry)} is not an IP address or CIDR block`);
    else blocks.push(block);
  }
  return { blocks, problems };
}

/** Whether `address` is in one of `blocks` (an IPv4-mapped IPv6 address counts as its IPv4 address). */
export function inBlocks(address: string, blocks: readonly AddressBlock[]): boolean {
  const a = asBits(address);
  if (a === null) return false;
  return blocks.some((b) => b.bits === a.bits && a.value >> BigInt(b.bits - b.prefix) === b.value >> BigInt(b.bits - b.prefix));
}

/** One hop of X-Forwarded-For as an address: `1.2.3.4`, `1.2.3.4:5678`, `::1`, `[::1]`, `[::1]:5678`; null otherwise. */
function hopAddress(hop: string): string | null {
  const text = hop.trim();
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(text);
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text);
  const address = bracketed?.[1] ?? v4WithPort?.[1] ?? text;
  return isIP(address) === 0 ? null : address;
}

/**
 * The client a request came from. Only when the socket's peer is a trusted proxy is
 * X-Forwarded-For read: from its right end, each hop a trusted proxy added is passed
 * over, and the first address not trusted is the client (what a client wrote itself sits
 * to the left of it, never read). A hop that is not an address, before that one is
 * found, leaves the peer as the client. Every hop trusted: the leftmost.
 */
export function forwardedClient(peer: string, forwardedFor: string | undefined, trusted: readonly AddressBlock[]): string {
  if (trusted.length === 0 || forwardedFor === undefined || !inBlocks(peer, trusted)) return peer;
  const hops = forwardedFor.split(",");
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const address = hopAddress(hops[i]!);
    if (address === null) return peer;
    client = address;
    if (!inBlocks(address, trusted)) return client;
  }
  return client;
}
