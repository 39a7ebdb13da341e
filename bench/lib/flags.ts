/** A bench script's `--flag value` pairs, each with its value read as a number >= 0 on demand. */
export function* flagPairs(argv: string[]): Generator<{ flag: string; value: string; num: () => number }> {
  for (let i = 0; i < argv.length; i += 2) {
    const [flag = "", value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    const num = () => {
      const n = Number(value);
      if (!Number.isFinite(n) || n < 0) throw new Error(`${flag} must be a number >= 0, not '${value}'`);
      return n;
    };
    yield { flag, value, num };
  }
}
