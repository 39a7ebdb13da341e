/**
 * Micro-USD as a statement shows it, to the cent: `$5.10`, `-$0.06`, `$1,234.50`. Half a cent rounds away
 * from zero; an amount under half a cent that is not zero shows as `<$0.01` rather than `$0.00`.
 * No imports: the dashboard's bundle uses it too.
 */
export function formatCents(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(micros);
  if (abs > 0 && abs < 5_000) return `${sign}<$0.01`;
  const cents = Math.floor((abs + 5_000) / 10_000);
  const whole = Math.floor(cents / 100).toLocaleString("en-US");
  return `${sign}$${whole}.${String(cents % 100).padStart(2, "0")}`;
}
