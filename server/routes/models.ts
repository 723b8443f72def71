/** GET /api/generate/models: discovery from the catalog. */
import { Router } from 'express';
import type { operations } from '../../generated/api.ts';
import type { AppDeps } from '../app.ts';

type ListModels = operations['listModels']['responses'][200]['content']['application/json'];

export function modelsRouter({ catalog }: Pick<AppDeps, 'catalog'>): Router {
  const router = Router();
  router.get('/api/generate/models', (_req, res) => {
    const body: ListModels = { models: catalog.publicModels(), accountingPeriod: 'UTC calendar month' };
    res.status(200).json(body);
  });
  return router;
}
