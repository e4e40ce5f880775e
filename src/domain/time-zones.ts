/** Whether Intl knows this IANA zone name (`Asia/Kolkata`, `UTC`): the only zones tracklane takes. */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
