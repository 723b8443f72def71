/**
 * GET /api/generate/models: discovery from the catalog, which is fixed once the
 * server has started: the body is built (and, unless responses are validated,
 * serialized) once, not per request.
 */
import { Router } from 'express';
import type { operations } from '../../generated/api.ts';
import type { AppDeps } from '../deps.ts';

type ListModels = operations['listModels']['responses'][200]['content']['application/json'];

export function modelsRouter({ catalog, config }: Pick<AppDeps, 'catalog' | 'config'>): Router {
  const router = Router();
  const body: ListModels = { models: catalog.publicModels(), accountingPeriod: 'UTC calendar month' };
  const bytes = Buffer.from(JSON.stringify(body));
  router.get('/api/generate/models', (_req, res) => {
    // res.json is what response validation checks; without it, the bytes made at start.
    if (config.validateResponses) res.status(200).json(body);
    else res.status(200).type('json').send(bytes);
  });
  return router;
}
