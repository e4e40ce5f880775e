/** The strict exposition reader of test/helpers/prometheus.ts refuses what it is there to catch. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parsePrometheus, valueOf } from "../helpers/prometheus.ts";

const GOOD = `# HELP a_total Things.
# TYPE a_total counter
a_total{kind="x\\"y\\\\z\\n"} 3
# HELP h Sizes.
# TYPE h histogram
h_bucket{le="1"} 1
h_bucket{le="+Inf"} 2
h_sum 4.5
h_count 2
# HELP g Level.
# TYPE g gauge
g 1e3
`;

describe("parsePrometheus", () => {
  it("reads valid text, unescaping label values", () => {
    const families = parsePrometheus(GOOD);
    assert.equal(valueOf(families, "a_total", { kind: 'x"y\\z\n' }), 3);
    assert.equal(valueOf(families, "h_count"), 2);
    assert.equal(valueOf(families, "g"), 1000);
  });

  const bad: [string, string, RegExp][] = [
    ["a sample before its # TYPE", "x 1\n# TYPE x gauge\n", /without a # TYPE/],
    ["a counter not ending in _total", "# HELP c C.\n# TYPE c counter\nc 1\n", /does not end in _total/],
    ["a series twice", "# HELP g G.\n# TYPE g gauge\ng{a=\"1\"} 1\ng{a=\"1\"} 2\n", /series twice/],
    ["a bad escape", '# HELP g G.\n# TYPE g gauge\ng{a="\\t"} 1\n', /bad escape/],
    ["an unquoted label value", "# HELP g G.\n# TYPE g gauge\ng{a=1} 1\n", /not quoted/],
    ["no +Inf bucket", '# HELP h H.\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n', /no \+Inf/],
    ["buckets that shrink", '# HELP h H.\n# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n', /not cumulative/],
    ["+Inf other than _count", '# HELP h H.\n# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n', /is not _count/],
    ["no _sum", '# HELP h H.\n# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_count 1\n', /no _sum/],
    ["a family split in two", "# HELP a A.\n# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n", /not contiguous/],
    ["a negative counter", "# HELP c_total C.\n# TYPE c_total counter\nc_total -1\n", /below 0/],
    ["a bad value", "# HELP g G.\n# TYPE g gauge\ng one\n", /bad value/],
    ["no # HELP", "# TYPE g gauge\ng 1\n", /no # HELP/],
  ];
  for (const [what, text, problem] of bad) {
    it(`refuses ${what}`, () => assert.throws(() => parsePrometheus(text), problem));
  }
});
