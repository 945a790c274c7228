/** RFC 3339 timestamps, as add's bodies carry them. */

// RFC 3339 §5.6 date-time: seconds required, an offset required ("Z" or ±hh:mm); "T" and "Z"
// may be lower case there, and a leap second is 60, which zod's iso.datetime both refuses.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/** Whether `value` is an RFC 3339 date-time with seconds and an offset (docs/api.md#add). */
export function isRfc3339DateTime(value: string): boolean {
  const match = RFC3339.exec(value);
  if (!match) return false;
  const [year, month, day, hour, minute, second, offsetHour, offsetMinute] = match
    .slice(1)
    .map((part) => (part === undefined ? 0 : Number(part)));
  const leap = year! % 4 === 0 && (year! % 100 !== 0 || year! % 400 === 0);
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month! - 1];
  return (
    daysInMonth !== undefined &&
    day! >= 1 &&
    day! <= daysInMonth &&
    hour! <= 23 &&
    minute! <= 59 &&
    second! <= 60 &&
    offsetHour! <= 23 &&
    offsetMinute! <= 59
  );
}
