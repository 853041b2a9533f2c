/**
 * Plain Playwright's `test` for the hub's pages, failing any test in whose pages a script
 * threw and nobody caught it (the browser's `pageerror`), in every browser context the
 * test opens: its own `context`, and those `browser.newContext()` makes
 * (`signInToHome`). The listener sits on each context as it is created, before its first
 * page loads.
 */
import { BrowserContext, expect, test as base } from '@playwright/test';

export const test = base.extend<{ pageErrors: string[] }>({
  pageErrors: [
    async ({ browser }, use) => {
      const errors: string[] = [];
      const newContext = browser.newContext;
      browser.newContext = async (...options) => {
        const context = await newContext.apply(browser, options);
        watch(context, errors);
        return context;
      };
      try {
        await use(errors);
      } finally {
        browser.newContext = newContext;
      }
      expect(errors, 'uncaught errors in the hub pages').toEqual([]);
    },
    { auto: true }
  ],
  context: async ({ context, pageErrors }, use) => {
    watch(context, pageErrors);
    await use(context);
  }
});

/** Record the uncaught errors of `context`'s pages in `errors`. */
function watch(context: BrowserContext, errors: string[]): void {
  context.on('weberror', webError => {
    const error = webError.error();
    errors.push(`${error.message}\n${error.stack ?? ''}`);
  });
}

export { expect };
