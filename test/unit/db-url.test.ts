/** Postgres URLs as libpq reads their host and port (src/db/url.ts). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { connectTarget, describeTarget, withDatabase } from "../../src/db/url.ts";

describe("postgres URLs", () => {
  it("leaves a TCP URL as it is, other query settings included", () => {
    assert.deepEqual(connectTarget("postgres://u:p@db.example:5433/app?sslmode=require"), {
      url: "postgres://u:p@db.example:5433/app?sslmode=require",
    });
  });

  it("takes a socket directory out of the query, with or without a host before it", () => {
    assert.deepEqual(connectTarget("postgres://u@/app?host=/var/run/postgresql"), { url: "postgres://u@localhost/app", host: "/var/run/postgresql" });
    assert.deepEqual(connectTarget("postgres:///app?host=/tmp&application_name=x"), { url: "postgres:///app?application_name=x", host: "/tmp" });
    // libpq: the query's host wins over the authority's.
    assert.deepEqual(connectTarget("postgresql://u:p@localhost:5433/app?host=%2Ftmp"), { url: "postgresql://u:p@localhost:5433/app", host: "/tmp" });
  });

  it("leaves a URL with no host at all to PGHOST, else localhost, as node-postgres does", () => {
    assert.deepEqual(connectTarget("postgres://app:s%40cret@/orders?sslmode=disable"), { url: "postgres:///orders?sslmode=disable", user: "app", pass: "s@cret" });
    assert.deepEqual(connectTarget("postgres:///orders"), { url: "postgres:///orders" });
    assert.equal(describeTarget("postgres://app@/orders"), "localhost:5432/orders");
  });

  it("reads a percent-encoded host as a socket directory", () => {
    assert.deepEqual(connectTarget("postgres://u@%2Fvar%2Frun%2Fpostgresql:5434/app"), {
      url: "postgres://u@localhost:5434/app",
      host: "/var/run/postgresql",
    });
  });

  it("takes libpq's user, password and dbname out of the query: they are no server settings", () => {
    assert.deepEqual(connectTarget("postgres:///?host=/tmp&user=app&password=s%26cret&dbname=orders&sslmode=disable"), {
      url: "postgres:///?sslmode=disable",
      host: "/tmp",
      user: "app",
      pass: "s&cret",
      database: "orders",
    });
    assert.equal(describeTarget("postgres:///?host=/tmp&dbname=orders&password=s"), "socket /tmp/.s.PGSQL.5432/orders");
  });

  it("takes the port out of the query, and refuses one that is no port", () => {
    assert.deepEqual(connectTarget("postgres:///app?host=/tmp&port=5433"), { url: "postgres:///app", host: "/tmp", port: 5433 });
    assert.throws(() => connectTarget("postgres:///app?port=54x"), /port=54x in its query: a port is a whole number from 1 to 65535/);
    assert.throws(() => connectTarget("postgres:///app?port=70000"), /port=70000/);
  });

  it("refuses what is no postgres URL without repeating it (it may hold a password)", () => {
    assert.throws(() => connectTarget("postgres://u:secret@[bad/app"), (err: Error) => err.message === "is not a valid URL");
    assert.throws(() => connectTarget("mysql://u:secret@h/app"), (err: Error) => !err.message.includes("secret") && /postgres:\/\//.test(err.message));
  });

  it("describes where a URL connects, never with its user or password", () => {
    assert.equal(describeTarget("postgres://u:secret@db.example/app"), "db.example:5432/app");
    assert.equal(describeTarget("postgres://u:secret@/app?host=/var/run/postgresql/&port=5433"), "socket /var/run/postgresql/.s.PGSQL.5433/app");
    assert.equal(describeTarget("postgres://u@%2Ftmp/app"), "socket /tmp/.s.PGSQL.5432/app");
    assert.equal(describeTarget("not a url"), null);
  });

  it("names another database on the same server, reached the same way", () => {
    assert.equal(withDatabase("postgres://u:p@db.example:5433/app?sslmode=require", "scratch"), "postgres://u:p@db.example:5433/scratch?sslmode=require");
    // A socket directory stays where it was spelt; a hostless URL stays hostless (PGHOST).
    assert.equal(withDatabase("postgres://u@/app?host=/var/run/postgresql&port=5433", "scratch"), "postgres://u@/scratch?host=/var/run/postgresql&port=5433");
    assert.equal(withDatabase("postgres:///app?host=/tmp", "scratch"), "postgres:///scratch?host=/tmp");
    assert.equal(withDatabase("postgres://u@%2Ftmp:5434/app", "scratch"), "postgres://u@%2Ftmp:5434/scratch");
    assert.equal(withDatabase("postgres://u@/app", "scratch"), "postgres://u@/scratch");
    // libpq's dbname would win over the path: it goes.
    assert.deepEqual(connectTarget(withDatabase("postgres:///?host=/tmp&dbname=app&user=u", "scratch")), { url: "postgres:///scratch", host: "/tmp", user: "u" });
    assert.equal(describeTarget(withDatabase("postgres://u@localhost/app?host=%2Ftmp", "scratch")), "socket /tmp/.s.PGSQL.5432/scratch");
    assert.throws(() => withDatabase("postgres://u:secret@[bad/app", "x"), (err: Error) => err.message === "is not a valid URL");
  });
});
